"""The ten-point browser check (spec: browser-check.md; rubric as data in checks/)."""
