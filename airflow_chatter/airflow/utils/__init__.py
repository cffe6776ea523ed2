"""Small helpers the whole Airflow layer shares, below the hooks: the one operator-argument parser (``values``),
secret scrubbing for error texts (``secrets``), the Azure SDK's HTTP log quieting (``sdk_logging``) and the
``[core] hostname_callable`` for several workers on one host (``hostname``). Nothing here imports the layer."""
