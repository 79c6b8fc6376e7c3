"""Server-free device-to-device FL (pFedWN, spec seed_003): config, selection, driver."""
