"""The dashboard's routes, one module per page and its actions; each module's `routes(site)`
returns its Routes. They render and act only through site.Site (the shared renderer and the
checks of every action), never around it.
"""
