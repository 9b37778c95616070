"""LOINC labs and vitals, each with the value model the generator draws its results from.

A measurement is more than a concept: it has a unit, a plausible range it is clipped to, a
reference interval (written to OMOP ``range_low``/``range_high`` and used to flag results in
notes), a mean, a spread and a number of decimals. Kept apart from :mod:`.catalog` because the
generator, the note writer and the benchmarks built on these patients all read these numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from clinieval.ehr.synth.concepts import (
    U_CEL,
    U_CM,
    U_GDL,
    U_KG,
    U_KGM2,
    U_KUL,
    U_MGDL,
    U_MIN,
    U_MMHG,
    U_MMOL,
    U_PCT,
    Concept,
)


@dataclass(frozen=True, slots=True)
class LabDef:
    """A LOINC measurement: values are drawn around ``mean`` and always kept in ``[low, high]``.

    ``ref_low``/``ref_high`` is the reference (normal) interval written to OMOP ``range_low`` and
    ``range_high`` and used to flag results in notes.
    """

    concept: Concept
    short: str
    unit: Concept
    low: float
    high: float
    ref_low: float
    ref_high: float
    mean: float
    sd: float
    decimals: int

    def fmt(self, value: float) -> str:
        return f"{value:.{self.decimals}f}"


def _lab(
    cid: int,
    code: str,
    name: str,
    short: str,
    unit: Concept,
    low: float,
    high: float,
    ref: tuple[float, float],
    mean: float,
    sd: float,
    dec: int,
    klass: str = "Lab Test",
) -> LabDef:
    concept = Concept(cid, name, "Measurement", "LOINC", klass, code)
    return LabDef(concept, short, unit, low, high, ref[0], ref[1], mean, sd, dec)


_VS = "Clinical Observation"
LABS: dict[str, LabDef] = {
    lab.concept.code: lab
    for lab in (
        _lab(
            3004501,
            "2345-7",
            "Glucose [Mass/volume] in Serum or Plasma",
            "glucose",
            U_MGDL,
            60,
            400,
            (70, 99),
            92,
            9,
            0,
        ),
        _lab(
            3004410,
            "4548-4",
            "Hemoglobin A1c/Hemoglobin.total in Blood",
            "hemoglobin A1c",
            U_PCT,
            4.0,
            13.0,
            (4.0, 5.6),
            5.3,
            0.3,
            1,
        ),
        _lab(
            3000963,
            "718-7",
            "Hemoglobin [Mass/volume] in Blood",
            "hemoglobin",
            U_GDL,
            7.0,
            18.5,
            (12.0, 17.5),
            14.0,
            1.1,
            1,
        ),
        _lab(
            3000905,
            "6690-2",
            "Leukocytes [#/volume] in Blood by Automated count",
            "white blood cell count",
            U_KUL,
            2.0,
            25.0,
            (4.5, 11.0),
            7.2,
            1.5,
            1,
        ),
        _lab(
            3024929,
            "777-3",
            "Platelets [#/volume] in Blood by Automated count",
            "platelet count",
            U_KUL,
            80,
            550,
            (150, 400),
            260,
            50,
            0,
        ),
        _lab(
            3016723,
            "2160-0",
            "Creatinine [Mass/volume] in Serum or Plasma",
            "creatinine",
            U_MGDL,
            0.4,
            6.0,
            (0.6, 1.3),
            0.95,
            0.15,
            2,
        ),
        _lab(
            3013682,
            "3094-0",
            "Urea nitrogen [Mass/volume] in Serum or Plasma",
            "blood urea nitrogen",
            U_MGDL,
            5,
            80,
            (7, 20),
            14,
            3,
            0,
        ),
        _lab(
            3019550,
            "2951-2",
            "Sodium [Moles/volume] in Serum or Plasma",
            "sodium",
            U_MMOL,
            120,
            155,
            (135, 145),
            140,
            2,
            0,
        ),
        _lab(
            3023103,
            "2823-3",
            "Potassium [Moles/volume] in Serum or Plasma",
            "potassium",
            U_MMOL,
            2.8,
            6.5,
            (3.5, 5.1),
            4.2,
            0.3,
            1,
        ),
        _lab(
            3027114,
            "2093-3",
            "Cholesterol [Mass/volume] in Serum or Plasma",
            "total cholesterol",
            U_MGDL,
            100,
            320,
            (125, 200),
            180,
            20,
            0,
        ),
        _lab(
            3007070,
            "2085-9",
            "Cholesterol in HDL [Mass/volume] in Serum or Plasma",
            "HDL cholesterol",
            U_MGDL,
            20,
            100,
            (40, 60),
            52,
            8,
            0,
        ),
        _lab(
            3022192,
            "2571-8",
            "Triglyceride [Mass/volume] in Serum or Plasma",
            "triglycerides",
            U_MGDL,
            40,
            500,
            (40, 150),
            120,
            25,
            0,
        ),
        _lab(
            3004249,
            "8480-6",
            "Systolic blood pressure",
            "systolic blood pressure",
            U_MMHG,
            85,
            200,
            (90, 120),
            118,
            8,
            0,
            _VS,
        ),
        _lab(
            3012888,
            "8462-4",
            "Diastolic blood pressure",
            "diastolic blood pressure",
            U_MMHG,
            45,
            120,
            (60, 80),
            76,
            6,
            0,
            _VS,
        ),
        _lab(3027018, "8867-4", "Heart rate", "heart rate", U_MIN, 45, 150, (60, 100), 74, 8, 0, _VS),
        _lab(
            3024171,
            "9279-1",
            "Respiratory rate",
            "respiratory rate",
            U_MIN,
            10,
            32,
            (12, 20),
            15,
            1.5,
            0,
            _VS,
        ),
        _lab(
            3020891,
            "8310-5",
            "Body temperature",
            "temperature",
            U_CEL,
            35.5,
            40.5,
            (36.1, 37.5),
            36.8,
            0.25,
            1,
            _VS,
        ),
        _lab(
            40762499,
            "59408-5",
            "Oxygen saturation in Arterial blood by Pulse oximetry",
            "oxygen saturation",
            U_PCT,
            82,
            100,
            (95, 100),
            97.5,
            1.0,
            0,
            _VS,
        ),
        _lab(3025315, "29463-7", "Body weight", "weight", U_KG, 40, 180, (40, 180), 78, 14, 1, _VS),
        _lab(3036277, "8302-2", "Body height", "height", U_CM, 145, 200, (145, 200), 170, 9, 1, _VS),
        _lab(
            3038553,
            "39156-5",
            "Body mass index (BMI) [Ratio]",
            "BMI",
            U_KGM2,
            15,
            60,
            (18.5, 25),
            26,
            4,
            1,
            _VS,
        ),
    )
}
