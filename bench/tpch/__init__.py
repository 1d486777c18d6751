"""TPC-H with refresh functions: dtables INCREMENTAL vs FULL refresh vs Spark Declarative Pipelines.

`python -m bench.tpch --sf 1` generates the data (tpchgen-cli), loads it into change-tracked Delta tables through
dtables, creates one dynamic table per TPC-H query (REFRESH_MODE = AUTO, and a FULL twin), applies the refresh
functions RF1 (new orders), RF2 (deleted orders) and an update batch, and after each batch refreshes and times the
three systems side by side on the same data. See bench/README.md.
"""
