-- Fails with SQLSTATE 2201B, saying why, unless @re is a regular expression PostgreSQL reads.
SELECT '' ~* @re::text
