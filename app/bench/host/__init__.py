"""The host's time a verify round, per engine boot: wall time against the GPU's busy time
(`bench --host-time`; the method of lab/scripts/gpu_host_time.py, for any engine, the stock
server included)."""
