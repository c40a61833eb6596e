"""A peer in the same `bench` run: stock SGLang's own server, started with the official Spark
recipe's flags (no ling-chat patches), measured over HTTP on the same model and workloads."""
