"""Spark and Delta set-up: the jars Delta needs and a configured SparkSession."""
