"""The sweep table: a sweep's runs, params against metrics (table), its sort and filter rules
(table_rules) and the one query that applies them (table_sql); its runs grouped by seed
(groups)."""
