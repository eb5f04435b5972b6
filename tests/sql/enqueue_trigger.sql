-- pgq.enqueue_trigger: a row trigger enqueues the changed row (NEW, OLD on DELETE) with
-- headers {table, schema, op}, in the transaction of the change; validation; privileges.
BEGIN;
SELECT plan(18);

\ir fixtures/setup.sql

CREATE TABLE public.tap_orders (
    id integer PRIMARY KEY,
    item text,
    qty integer
);
CREATE TRIGGER tap_orders_enqueue
AFTER INSERT OR UPDATE OR DELETE ON public.tap_orders
FOR EACH ROW EXECUTE FUNCTION pgq.enqueue_trigger('orders');

-- INSERT, UPDATE, DELETE.
INSERT INTO public.tap_orders VALUES (1, 'book', 2);
SELECT results_eq(
    $$
        SELECT j.entrypoint, j.status, j.priority, j.payload, j.headers
        FROM pgq._jobs AS j WHERE j.entrypoint = 'orders'
    $$,
    $$
        VALUES (
            'orders', 'queued', 0, '{"id": 1, "item": "book", "qty": 2}'::jsonb,
            '{"table": "tap_orders", "schema": "public", "op": "INSERT"}'::jsonb
        )
    $$,
    'INSERT enqueues NEW as the payload, headers name the table, schema and op'
);

UPDATE public.tap_orders SET qty = 3 WHERE id = 1;
SELECT results_eq(
    $$
        SELECT j.payload, j.headers ->> 'op'
        FROM pgq._jobs AS j WHERE j.entrypoint = 'orders' ORDER BY j.id DESC LIMIT 1
    $$,
    $$ VALUES ('{"id": 1, "item": "book", "qty": 3}'::jsonb, 'UPDATE') $$,
    'UPDATE enqueues NEW (the updated row), op UPDATE'
);

DELETE FROM public.tap_orders WHERE id = 1;
SELECT results_eq(
    $$
        SELECT j.payload, j.headers ->> 'op'
        FROM pgq._jobs AS j WHERE j.entrypoint = 'orders' ORDER BY j.id DESC LIMIT 1
    $$,
    $$ VALUES ('{"id": 1, "item": "book", "qty": 3}'::jsonb, 'DELETE') $$,
    'DELETE enqueues OLD (the deleted row), op DELETE'
);
SELECT is(
    (SELECT count(*) FROM pgq._jobs AS j WHERE j.entrypoint = 'orders'),
    3::bigint,
    'one job per row change'
);

-- One job per row of a multi-row statement.
INSERT INTO public.tap_orders VALUES (2, 'pen', 1), (3, 'ink', 5);
SELECT bag_eq(
    $$
        SELECT (j.payload ->> 'id')::integer FROM pgq._jobs AS j
        WHERE j.entrypoint = 'orders' AND j.headers ->> 'op' = 'INSERT'
    $$,
    ARRAY[1, 2, 3],
    'a two-row INSERT enqueues one job per row'
);

-- The job commits or rolls back with the row change.
DO $$
BEGIN
    INSERT INTO public.tap_orders VALUES (4, 'lost', 1);
    RAISE EXCEPTION 'roll back the insert';
EXCEPTION WHEN raise_exception THEN
    NULL;
END
$$;
SELECT is(
    (SELECT count(*) FROM pgq._jobs AS j WHERE j.entrypoint = 'orders' AND j.payload ->> 'id' = '4'),
    0::bigint,
    'a rolled-back row change leaves no job'
);

-- Second argument: the priority. A BEFORE trigger lets the row through unchanged.
CREATE TABLE public.tap_urgent (id integer PRIMARY KEY);
CREATE TRIGGER tap_urgent_enqueue
BEFORE INSERT ON public.tap_urgent
FOR EACH ROW EXECUTE FUNCTION pgq.enqueue_trigger('urgent', '7');
INSERT INTO public.tap_urgent VALUES (10);
SELECT is(
    (SELECT j.priority FROM pgq._jobs AS j WHERE j.entrypoint = 'urgent'),
    7,
    'the second trigger argument is the priority'
);
SELECT is(
    (SELECT count(*) FROM public.tap_urgent AS u WHERE u.id = 10),
    1::bigint,
    'a BEFORE trigger returns the row: the INSERT happens'
);

-- Misuse of the trigger raises PQ001 (and the row change fails with it).
CREATE TABLE public.tap_bad (id integer);
CREATE TRIGGER tap_bad_statement
AFTER INSERT ON public.tap_bad
FOR EACH STATEMENT EXECUTE FUNCTION pgq.enqueue_trigger('bad');
SELECT throws_ok(
    $$INSERT INTO public.tap_bad VALUES (1)$$, 'PQ001', NULL,
    'a FOR EACH STATEMENT trigger raises PQ001'
);
DROP TRIGGER tap_bad_statement ON public.tap_bad;

CREATE TRIGGER tap_bad_no_args
AFTER INSERT ON public.tap_bad
FOR EACH ROW EXECUTE FUNCTION pgq.enqueue_trigger();
SELECT throws_ok(
    $$INSERT INTO public.tap_bad VALUES (1)$$, 'PQ001', NULL,
    'a trigger without an entrypoint argument raises PQ001'
);
DROP TRIGGER tap_bad_no_args ON public.tap_bad;

CREATE TRIGGER tap_bad_empty
AFTER INSERT ON public.tap_bad
FOR EACH ROW EXECUTE FUNCTION pgq.enqueue_trigger('');
SELECT throws_ok(
    $$INSERT INTO public.tap_bad VALUES (1)$$, 'PQ001', NULL,
    'a trigger with an empty entrypoint raises PQ001'
);
DROP TRIGGER tap_bad_empty ON public.tap_bad;

CREATE TRIGGER tap_bad_control
AFTER INSERT ON public.tap_bad
FOR EACH ROW EXECUTE FUNCTION pgq.enqueue_trigger(E'bad\n');
SELECT throws_ok(
    $$INSERT INTO public.tap_bad VALUES (1)$$, 'PQ001', NULL,
    'a trigger with a control character in the entrypoint raises PQ001'
);
DROP TRIGGER tap_bad_control ON public.tap_bad;

-- A priority argument that is not an integer raises PQ001 naming the argument.
CREATE TRIGGER tap_bad_priority
AFTER INSERT ON public.tap_bad
FOR EACH ROW EXECUTE FUNCTION pgq.enqueue_trigger('bad', 'high');
SELECT is(
    pg_temp.try($$INSERT INTO public.tap_bad VALUES (1)$$),
    'ERROR PQ001',
    'a non-integer priority argument raises PQ001'
);
DROP TRIGGER tap_bad_priority ON public.tap_bad;

SELECT is(
    (SELECT count(*) FROM public.tap_bad),
    0::bigint,
    'the failed row changes did not happen'
);
SELECT is(
    (SELECT count(*) FROM pgq._jobs AS j WHERE j.entrypoint IN ('bad', '') OR j.entrypoint LIKE 'bad%'),
    0::bigint,
    'the failed row changes enqueued nothing'
);

-- Privileges: a producer changing the table enqueues through the trigger without any
-- access to pgq's tables.
GRANT INSERT, SELECT ON public.tap_orders TO pgq_producer;
SET ROLE pgq_producer;
SELECT lives_ok(
    $$INSERT INTO public.tap_orders VALUES (5, 'by producer', 1)$$,
    'pgq_producer can insert into a table with the trigger'
);
SELECT throws_ok($$SELECT count(*) FROM pgq._jobs$$, '42501', NULL, 'pgq_producer still cannot read pgq._jobs');
RESET ROLE;
SELECT is(
    (SELECT count(*) FROM pgq._jobs AS j WHERE j.entrypoint = 'orders' AND j.payload ->> 'item' = 'by producer'),
    1::bigint,
    'the producer''s row change was enqueued'
);

SELECT * FROM finish();
ROLLBACK;
