from pacer_conformance import AdmissionConformance


class TestFixedPointAdmission(AdmissionConformance):
    strategies = ("fixed-point",)
