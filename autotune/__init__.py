"""autotune: templates, config spaces, measurement, cost models, tuners and tuning logs."""
