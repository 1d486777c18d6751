"""The SQL surface: the dtables dialect (Spark SQL plus dtables statements) and the statement executor."""
