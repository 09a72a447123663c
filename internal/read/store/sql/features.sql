-- The schema objects later migrations add, as this schema has them.
SELECT to_regprocedure(quote_ident(@schema) || '.as_of(timestamptz, text, text, text)') IS NOT NULL,
       to_regclass(quote_ident(@schema) || '.owners') IS NOT NULL,
       to_regclass(quote_ident(@schema) || '.change_actors') IS NOT NULL,
       to_regclass(quote_ident(@schema) || '.events') IS NOT NULL
