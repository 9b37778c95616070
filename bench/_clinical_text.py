"""Deterministic clinical-looking response/reference pairs for the text-metric benchmark.

A response is a run of sentences assembled from word lists (history, findings, vitals, labs,
medications, plan) until it reaches a word count drawn from [min_words, max_words]. Its reference
is a perturbed copy: some sentences dropped, reordered or replaced, some words swapped for
clinical synonyms or inflected forms, some numbers changed. So every metric lands in a middle
range instead of 0 or 1, and METEOR's stem and WordNet stages have real work to do.
"""

from __future__ import annotations

import random

_AGES = [str(n) for n in range(19, 94)]
_SUBJECTS = ["The patient", "She", "He", "The patient's daughter", "The resident", "Nursing staff"]
_SEX = ["man", "woman", "male", "female", "gentleman", "lady"]
_HISTORY = [
    "hypertension", "type 2 diabetes mellitus", "chronic kidney disease stage 3", "atrial fibrillation",
    "coronary artery disease", "congestive heart failure", "chronic obstructive pulmonary disease",
    "asthma", "hyperlipidemia", "hypothyroidism", "obstructive sleep apnea", "prior stroke",
    "peripheral vascular disease", "gastroesophageal reflux disease", "osteoarthritis", "depression",
]  # fmt: skip
_SYMPTOMS = [
    "chest pain", "shortness of breath", "fever", "productive cough", "abdominal pain", "nausea",
    "vomiting", "dizziness", "palpitations", "fatigue", "headache", "lower extremity swelling",
    "back pain", "confusion", "weakness", "diarrhea", "chills", "syncope", "wheezing", "dysuria",
]  # fmt: skip
_MODIFIERS = ["intermittent", "worsening", "mild", "severe", "acute", "progressive", "new", "persistent"]
_DURATIONS = [
    "for three days", "since yesterday", "over the past week", "for two weeks", "since this morning",
    "for several months", "for about ten days", "overnight",
]  # fmt: skip
_VERBS = ["reports", "describes", "complains of", "presented with", "endorses", "was admitted with"]
_DENIALS = ["denies", "reports no", "has not had", "is without"]
_EXAM = [
    "Lungs were clear to auscultation bilaterally", "Heart sounds were regular without murmurs",
    "The abdomen was soft and nontender", "There was trace pitting edema in both ankles",
    "Crackles were heard at the right lung base", "Mucous membranes were dry",
    "Neurological examination was nonfocal", "The surgical wound was clean and dry",
    "Jugular venous pressure was elevated", "There was tenderness over the epigastrium",
]  # fmt: skip
_LABS = [
    ("sodium", "mmol/L", 128, 146), ("potassium", "mmol/L", 3, 6), ("creatinine", "mg/dL", 1, 4),
    ("hemoglobin", "g/dL", 7, 16), ("white blood cell count", "x10^9/L", 3, 19),
    ("troponin", "ng/L", 3, 90), ("glucose", "mg/dL", 70, 340), ("lactate", "mmol/L", 1, 5),
]  # fmt: skip
_MEDS = [
    ("metoprolol", "25 mg twice daily"), ("lisinopril", "10 mg daily"), ("furosemide", "40 mg IV"),
    ("ceftriaxone", "1 g IV daily"), ("azithromycin", "500 mg daily"), ("apixaban", "5 mg twice daily"),
    ("insulin glargine", "20 units nightly"), ("atorvastatin", "40 mg nightly"),
    ("pantoprazole", "40 mg daily"), ("albuterol", "nebulizers every four hours"),
]  # fmt: skip
_PLANS = [
    "Continue current management and reassess in the morning", "Follow up with cardiology in two weeks",
    "Obtain a chest radiograph and repeat labs tomorrow", "Monitor on telemetry overnight",
    "Encourage oral intake and early ambulation", "Consult nephrology regarding the kidney function",
    "Discharge home once symptoms resolve", "Check blood cultures before any further antibiotics",
    "Titrate the diuretic to a net negative fluid balance", "Arrange physical therapy evaluation",
]  # fmt: skip

# Reference rewrites: synonyms (WordNet matches), inflections (stem matches), abbreviations.
_SYNONYMS = {
    "fever": "pyrexia", "shortness of breath": "dyspnea", "started": "initiated", "reports": "states",
    "worsening": "increasing", "severe": "serious", "mild": "slight", "chest pain": "thoracic pain",
    "abdominal pain": "belly pain", "clear": "unclear", "examination": "exam", "Continue": "Keep",
    "admitted": "hospitalized", "elevated": "raised", "tenderness": "soreness", "daily": "each day",
    "Follow up": "Review", "repeat": "redo", "evaluation": "assessment", "weakness": "debility",
    "dizziness": "vertigo", "palpitations": "palpitation", "vomiting": "vomited", "swelling": "swollen",
    "hypertension": "high blood pressure", "was": "is", "were": "are", "the": "a",
}  # fmt: skip


def _sentence(rng: random.Random) -> str:
    kind = rng.randrange(8)
    if kind == 0:
        return (
            f"{rng.choice(_SUBJECTS)} is a {rng.choice(_AGES)}-year-old {rng.choice(_SEX)} with a history"
            f" of {rng.choice(_HISTORY)} and {rng.choice(_HISTORY)}."
        )
    if kind == 1:
        return (
            f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_MODIFIERS)}"
            f" {rng.choice(_SYMPTOMS)} {rng.choice(_DURATIONS)}."
        )
    if kind == 2:
        a, b = rng.sample(_SYMPTOMS, 2)
        return f"{rng.choice(_SUBJECTS)} {rng.choice(_DENIALS)} {a} or {b}."
    if kind == 3:
        return (
            f"Blood pressure was {rng.randint(95, 185)}/{rng.randint(50, 105)} mmHg, heart rate"
            f" {rng.randint(48, 128)}, temperature {rng.randint(360, 395) / 10:.1f} C and oxygen"
            f" saturation {rng.randint(86, 100)}% on room air."
        )
    if kind == 4:
        return f"{rng.choice(_EXAM)}."
    if kind == 5:
        name, unit, lo, hi = rng.choice(_LABS)
        first, second = rng.randint(lo, hi), rng.randint(lo, hi)
        return f"Admission {name} was {first} {unit}, compared with {second} {unit}."
    if kind == 6:
        drug, dose = rng.choice(_MEDS)
        return f"{rng.choice(_SUBJECTS)} was started on {drug} {dose} for {rng.choice(_HISTORY)}."
    return f"{rng.choice(_PLANS)}."


def _response(rng: random.Random, n_words: int, max_words: int) -> list[str]:
    """Sentences until ``n_words`` is reached; a sentence that would pass ``max_words`` ends it."""
    sentences: list[str] = []
    words = 0
    while words < n_words:
        s = _sentence(rng)
        if words + len(s.split()) > max_words:
            break
        sentences.append(s)
        words += len(s.split())
    return sentences


def _perturb(rng: random.Random, sentences: list[str]) -> list[str]:
    out: list[str] = []
    for s in sentences:
        r = rng.random()
        if r < 0.2:
            continue  # dropped
        if r < 0.5:
            out.append(_sentence(rng))  # replaced by an unrelated sentence
            continue
        for old, new in _SYNONYMS.items():
            if old in s and rng.random() < 0.5:
                s = s.replace(old, new, 1)
        out.append(s)
    for i in range(len(out) - 1):
        if rng.random() < 0.1:
            out[i], out[i + 1] = out[i + 1], out[i]
    return out or [_sentence(rng)]


def clinical_pairs(
    n: int, seed: int = 0, min_words: int = 100, max_words: int = 300
) -> list[tuple[str, str]]:
    """``n`` (response, reference) pairs; the same arguments always give the same texts."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        sentences = _response(rng, rng.randint(min_words, max_words), max_words)
        response = " ".join(sentences)
        reference = " ".join(_perturb(rng, sentences))
        pairs.append((response, reference))
    return pairs
