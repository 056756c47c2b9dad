"""The lab's serving metrics from an EngineTrace: summary tables (``summary``) and goodput (``goodput``)."""
