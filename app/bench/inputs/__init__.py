"""What a bench run sends: synthetic workloads, GSM8K, and the published Spark suites."""
