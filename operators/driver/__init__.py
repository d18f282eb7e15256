"""The driver process and its endpoints: :class:`operators.driver.runner.JobRunner` and its
actions, the control endpoint, the Prometheus exporter, the query listener and the ``runner``
command line. The top level of ``operators``: nothing below imports it."""
