"""choird's opt-in Prometheus endpoint (§22.1): `metrics` records, `endpoint` serves.

Imported only when config.json sets `metrics.listen`, so neither prometheus_client nor this
package costs a choird (or choirctl) without it anything (`tests/test_start_imports.py`).
"""
