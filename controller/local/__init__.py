"""The local (embedded) backend: Prometheus on loopback, the runner's control client, the
evaluation loop, and the ``demo`` closed loop that ties them to a real Spark mini-cluster."""
