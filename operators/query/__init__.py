"""What runs the query: the Spark session (and the local standalone cluster with its CPU
quotas), the job — a declared pipeline, a user's script or function — and its sinks. Imports
sources, state and the leaves; never the driver's endpoints above it."""
