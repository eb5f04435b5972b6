-- Run after the functions on every install and upgrade: state the functions maintain.
SELECT pgq._ensure_partitions();
