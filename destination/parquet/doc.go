// Package parquet is a [tranche.Destination] that writes each partition
// of an asset as one Parquet file in Hive-style folders, which DuckDB,
// Spark, Trino, Polars and every other lake engine read.
package parquet
