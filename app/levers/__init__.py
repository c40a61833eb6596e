"""The levers: one module per lever (model/, draft/, checks/), the `Lever` record, profiles."""
