"""The fake DRA driver's objects, for the tools and tests that name them here: see
:mod:`framework.cli.demodevices`, where ``make demo`` finds them too."""

from framework.cli.demodevices import CLASS, DRIVER, claim, claim_template, device_class, gpu_slice

__all__ = ["CLASS", "DRIVER", "claim", "claim_template", "device_class", "gpu_slice"]
