-- Whether the schema holds kube-cdc's tables.
SELECT to_regclass(quote_ident(@schema) || '.changes') IS NOT NULL
   AND to_regclass(quote_ident(@schema) || '.checkpoints') IS NOT NULL
