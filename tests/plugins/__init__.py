"""Helpers of the plug-in tests (issue 46): the architecture rules' detectors."""
