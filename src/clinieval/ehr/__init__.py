"""EHR data layer: patient timelines and the formats they come in and go out as."""
