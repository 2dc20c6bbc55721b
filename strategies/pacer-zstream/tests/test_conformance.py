from pacer_conformance import AdmissionConformance, SchedulingConformance


class TestZStreamAdmission(AdmissionConformance):
    strategies = ("zstream",)


class TestZStreamScheduling(SchedulingConformance):
    strategies = ("edf", "rdas")
