"""The model run's defaults, in a module of their own so that the command line can name them in
its help without importing the engine."""

#: the architecture ``accel-sim model`` runs on unless ``--arch`` says otherwise: a whole chip
#: (24 Da Vinci cores sharing L2 and HBM; ``engine/chip.py``)
DEFAULT_ARCH = "ascend910b_chip"
#: the trace whose statistics by layer kind drive the data-dependent dataflows
DEFAULT_STATS = "smollm2-135m"
