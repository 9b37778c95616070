"""The project's own synthetic patients: realistic timelines over real code systems.

Every patient is drawn from its own random stream, seeded from ``(seed, index)``, so patient *i*
is the same whether 5 or 100,000 patients are generated, and the same seed gives byte-identical
output. A patient has demographics, a few chronic conditions (type 2 diabetes, hypertension,
heart failure, ...) that decide which drugs are prescribed and which labs are drawn, several
visits (outpatient follow-ups, emergency visits, inpatient stays of several days) and notes
written from templates: progress notes, emergency department notes, admission history and
physicals, and multi-paragraph discharge summaries that cite the patient's actual diagnoses,
medications and lab values.

Codes are real: SNOMED CT and ICD-10-CM conditions, RxNorm drugs, LOINC labs and vitals, UCUM
units, and the OMOP concept ids of the public OMOP vocabulary where the Synthea27Nj sample holds
them. Concepts that sample lacks (ICD-10-CM source codes, LOINC note classes) get ids from the
local range OMOP reserves for site concepts (above 2,000,000,000).

Two outputs: :func:`~clinieval.ehr.synth.generator.generate` streams
:class:`~clinieval.ehr.timeline.Timeline` objects, and
:func:`~clinieval.ehr.synth.writer.write_omop` writes an OMOP CDM 5.4 folder of CSV files with
the Synthea27Nj column names, streaming rows so any number of patients fits in bounded memory,
and atomically (a temporary sibling folder renamed into place; nothing is left behind on failure).

The modules, each importing only those above it:

* :mod:`.concepts` -- the OMOP concept record and the small fixed vocabularies (visit types,
  gender, race, ethnicity, note classes, UCUM units);
* :mod:`.labs` -- LOINC labs and vitals with the value ranges the generator draws from;
* :mod:`.catalog` -- conditions (SNOMED + ICD-10-CM), RxNorm drugs, procedures, smoking, and
  :func:`~.catalog.all_concepts`;
* :mod:`.clinical` -- what each condition brings (drugs, labs, lab effects, risk, visit
  reasons, note phrases);
* :mod:`.narrative` -- the note templates, written from what happened at a visit;
* :mod:`.generator` -- one patient's random story, as a Timeline;
* :mod:`.writer` -- timelines as OMOP CDM CSV tables.

The names below (every name callers used from the one-module ``clinieval.ehr.synth``) are
re-exported so ``from clinieval.ehr.synth import X`` keeps working; code in this project
imports them from the module that defines them.
"""

from clinieval.ehr.synth.catalog import (
    CONDITIONS,
    DRUGS,
    PROCEDURES,
    SMOKING,
    SMOKING_VALUES,
    all_concepts,
)
from clinieval.ehr.synth.clinical import BMP, CBC, ER_REASONS, IP_REASONS, VITALS
from clinieval.ehr.synth.concepts import LOCAL_CONCEPT_BASE, VISIT_TYPES
from clinieval.ehr.synth.generator import generate, patient
from clinieval.ehr.synth.labs import LABS
from clinieval.ehr.synth.writer import OMOP_COLUMNS, write_omop

__all__ = [
    "BMP",
    "CBC",
    "CONDITIONS",
    "DRUGS",
    "ER_REASONS",
    "IP_REASONS",
    "LABS",
    "LOCAL_CONCEPT_BASE",
    "OMOP_COLUMNS",
    "PROCEDURES",
    "SMOKING",
    "SMOKING_VALUES",
    "VISIT_TYPES",
    "VITALS",
    "all_concepts",
    "generate",
    "patient",
    "write_omop",
]
