"""A synthetic judge-evaluation set whose physician ratings are computable.

No patient data and no real physicians: every item is a patient question about one of a dozen
common conditions, a reference answer holding its key facts, and three responses built from known
parts — how many of the key facts each states, how many known-wrong statements it adds, whether it
is written as broken fragments. The "physicians'" ratings follow a stated rule from those counts
(so what a perfect judge would say is known), plus seeded disagreement between three raters:

* relevancy   = 1 + round(4 x facts stated / facts in the reference)
* correctness = relevancy - 2 x wrong statements, at least 1
* fluency     = 5, or 2 for a response written as fragments
* each rater moves each criterion by -1, 0 or +1 (25 %, 50 %, 25 %), kept within 1-5; chosen so
  the raters agree about as well as the paper's five physicians did (ICC2 about 0.8; paper 0.71).

Three response styles stand for three models of different quality (``careful``: most facts, no
errors; ``terse``: about half the facts; ``confident``: most facts, often one error, sometimes
fragments), so win rates between them are meaningful. The reference rationale states the counts,
for the rationale-quality check. This is a harness check, not a medical benchmark: the facts are
textbook-level and the ratings are a formula.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from clinieval.benchmarks.automedeval.records import JudgeItem, Rating, Response


@dataclass(frozen=True, slots=True)
class Condition:
    question: str
    facts: tuple[str, ...]
    errors: tuple[str, ...]


CONDITIONS: tuple[Condition, ...] = (
    Condition(
        "I was told my blood pressure is high. What should I do about it?",
        (
            "Blood pressure above 130/80 mmHg on repeated readings counts as hypertension.",
            "Cutting salt, losing weight and regular exercise lower blood pressure.",
            "First-line medicines include thiazide diuretics, ACE inhibitors and calcium channel blockers.",
            "Untreated hypertension raises the risk of stroke, heart attack and kidney disease.",
        ),
        (
            "Blood pressure only needs treatment once it causes headaches.",
            "Beta blockers must always be the first medicine for high blood pressure.",
        ),
    ),
    Condition(
        "My father was just diagnosed with type 2 diabetes. How is it managed?",
        (
            "Metformin is the usual first medicine for type 2 diabetes.",
            "HbA1c is checked every three to six months to follow glucose control.",
            "Diet changes, weight loss and exercise improve blood sugar.",
            "Yearly eye, foot and kidney checks catch complications early.",
        ),
        (
            "Type 2 diabetes always needs insulin from the day it is diagnosed.",
            "Fruit must be avoided completely by people with diabetes.",
        ),
    ),
    Condition(
        "What should I know about treating a urinary tract infection?",
        (
            "Uncomplicated bladder infections in women are treated with short antibiotic courses "
            "such as nitrofurantoin.",
            "Drinking enough fluid helps flush the urinary tract.",
            "Fever, flank pain or vomiting can mean a kidney infection that needs urgent care.",
            "A urine culture guides treatment when infections recur or do not respond.",
        ),
        (
            "Cranberry juice alone cures a bladder infection.",
            "Antibiotics should be stopped as soon as symptoms improve on the first day.",
        ),
    ),
    Condition(
        "I have heartburn most days. What can I do?",
        (
            "Frequent heartburn is usually gastro-oesophageal reflux disease.",
            "Avoiding late meals and raising the head of the bed reduce symptoms.",
            "Proton pump inhibitors such as omeprazole reduce stomach acid.",
            "Trouble swallowing, weight loss or vomiting blood need prompt investigation.",
        ),
        (
            "Heartburn is always caused by a heart problem.",
            "Drinking milk every night is the recommended long-term treatment.",
        ),
    ),
    Condition(
        "My child has a fever of 38.5 C. When should I worry?",
        (
            "Paracetamol or ibuprofen in weight-based doses relieve fever discomfort.",
            "A fever in a baby under three months old needs urgent medical review.",
            "A stiff neck, a rash that does not fade under a glass or drowsiness are danger signs.",
            "Giving fluids helps prevent dehydration during a fever.",
        ),
        (
            "Aspirin is the preferred fever medicine for children.",
            "Every fever above 38 C causes brain damage unless it is brought down.",
        ),
    ),
    Condition(
        "I keep getting migraines. How are they treated?",
        (
            "Triptans taken early in an attack can stop a migraine.",
            "Simple painkillers such as ibuprofen help milder attacks.",
            "A headache diary helps identify triggers such as missed meals or poor sleep.",
            "Frequent migraines can be prevented with daily medicines such as propranolol or topiramate.",
        ),
        (
            "Migraines are caused by poor eyesight and are cured by glasses.",
            "Opioids are the recommended first treatment for migraine.",
        ),
    ),
    Condition(
        "What are the signs of a stroke and what should I do?",
        (
            "Face drooping, arm weakness and slurred speech are the warning signs of a stroke.",
            "Call emergency services at once because clot treatment works only within hours.",
            "Note the time the symptoms started, since it decides which treatments are possible.",
            "High blood pressure, atrial fibrillation and smoking raise the risk of stroke.",
        ),
        (
            "Waiting until the next morning to see whether the symptoms pass is safe.",
            "Giving aspirin at home is always right before any scan.",
        ),
    ),
    Condition(
        "I was diagnosed with asthma. How do the inhalers work?",
        (
            "A reliever inhaler such as salbutamol opens the airways quickly during symptoms.",
            "A preventer inhaler with an inhaled corticosteroid reduces airway inflammation when used daily.",
            "Using a spacer improves how much medicine reaches the lungs.",
            "Needing the reliever more than twice a week means the asthma is not well controlled.",
        ),
        (
            "Inhaled steroids stop working if used every day.",
            "The reliever inhaler should be used daily even without symptoms to prevent attacks.",
        ),
    ),
    Condition(
        "I have low iron. What should I do?",
        (
            "Iron deficiency anaemia is treated with oral iron tablets.",
            "Taking iron with vitamin C and away from tea improves absorption.",
            "The cause of iron loss, such as heavy periods or bowel bleeding, should be looked for.",
            "Haemoglobin is rechecked after a few weeks of treatment.",
        ),
        (
            "Iron tablets should be taken with milk to protect the stomach.",
            "Low iron never needs any investigation of its cause.",
        ),
    ),
    Condition(
        "What should I do about high cholesterol?",
        (
            "Statins lower LDL cholesterol and the risk of heart attack.",
            "Eating less saturated fat and more fibre lowers cholesterol.",
            "The decision to treat depends on the overall cardiovascular risk.",
            "Muscle pain on a statin should be reported to a doctor.",
        ),
        (
            "Cholesterol in food is the main cause of all high cholesterol.",
            "Statins must be stopped when cholesterol reaches normal levels.",
        ),
    ),
    Condition(
        "I think I have the flu. How should I look after myself?",
        (
            "Rest, fluids and paracetamol help most people recover from flu within a week or two.",
            "Antiviral medicines such as oseltamivir help most when started within 48 hours "
            "in people at risk.",
            "Shortness of breath or chest pain during flu needs medical review.",
            "A yearly flu vaccine reduces the risk of infection.",
        ),
        ("Antibiotics cure the flu.", "The flu vaccine gives you the flu."),
    ),
    Condition(
        "My ankle is swollen after twisting it. What should I do?",
        (
            "Rest, ice, compression and elevation reduce swelling after a sprain.",
            "Being unable to bear weight or bone tenderness may mean a fracture needing an X-ray.",
            "Gentle movement after the first days speeds recovery.",
            "Most ankle sprains heal within a few weeks.",
        ),
        (
            "Heat should be applied straight away to reduce the swelling.",
            "A sprained ankle must be kept completely still for two months.",
        ),
    ),
)

FILLERS = ("Please see your doctor if you are worried.", "I hope this helps.", "Take care.")


@dataclass(frozen=True, slots=True)
class Style:
    """How one synthetic model answers: facts stated (choices), chance of one error, of fragments."""

    name: str
    facts: tuple[int, ...]
    error_chance: float
    fragment_chance: float


STYLES: tuple[Style, ...] = (
    Style("careful", (3, 4, 4), 0.0, 0.0),
    Style("terse", (1, 2, 2), 0.0, 0.1),
    Style("confident", (3, 3, 4), 0.6, 0.3),
)

PHYSICIANS: tuple[str, ...] = ("dr_a", "dr_b", "dr_c")


@dataclass(frozen=True, slots=True)
class Built:
    """What a response was built from (the numbers its true ratings come from)."""

    facts: int
    errors: int
    fragments: bool


def true_rating(built: Built, key_facts: int) -> Rating:
    """The rating rule (see the module docstring): what a rater without noise would give."""
    relevancy = 1 + round(4 * built.facts / key_facts)
    return Rating(relevancy, 2 if built.fragments else 5, max(1, relevancy - 2 * built.errors))


def _noisy(rating: Rating, rng: random.Random) -> Rating:
    def move(v: int) -> int:
        return min(5, max(1, v + rng.choices((-1, 0, 1), (0.25, 0.5, 0.25))[0]))

    return Rating(move(rating.relevancy), move(rating.fluency), move(rating.correctness))


def _text(condition: Condition, built: Built, rng: random.Random) -> str:
    parts = rng.sample(list(condition.facts), built.facts) + rng.sample(list(condition.errors), built.errors)
    rng.shuffle(parts)
    if built.fragments:
        # fragments: each statement cut to its first words, no sentence structure
        parts = [" ".join(p.rstrip(".").split()[:6]).lower() + " ..." for p in parts]
    else:
        parts.append(rng.choice(FILLERS))
    return " ".join(parts)


def _rationale(built: list[Built], key_facts: int) -> str:
    steps = [
        f"Doctor {i} states {b.facts} of the {key_facts} key points"
        + (
            f" and {b.errors} incorrect claim{'s' * (b.errors != 1)}"
            if b.errors
            else " with no incorrect claim"
        )
        + (", written as fragments." if b.fragments else ".")
        for i, b in enumerate(built, 1)
    ]
    return "Analyze: " + " ".join(f"Step {n}: {s}" for n, s in enumerate(steps, 1))


def synthetic_item(index: int, seed: int = 0) -> tuple[JudgeItem, list[Built]]:
    """Item ``index`` of the set, and what each of its responses was built from."""
    rng = random.Random(f"automedeval-synth:{seed}:{index}")
    condition = CONDITIONS[index % len(CONDITIONS)]
    k = len(condition.facts)
    built = [
        Built(rng.choice(s.facts), int(rng.random() < s.error_chance), rng.random() < s.fragment_chance)
        for s in STYLES
    ]
    responses = tuple(
        Response(
            style.name,
            _text(condition, b, rng),
            {p: _noisy(true_rating(b, k), rng) for p in PHYSICIANS},
        )
        for style, b in zip(STYLES, built, strict=True)
    )
    item = JudgeItem(
        id=f"synth-{index:04d}",
        question=condition.question,
        reference=" ".join(condition.facts),
        responses=responses,
        rationale=_rationale(built, k),
        source=f"synthetic:{seed}:{index}",
    )
    return item, built


def synthetic_set(n_items: int, seed: int = 0) -> list[JudgeItem]:
    """``n_items`` items (the conditions cycle; responses and ratings differ by index and seed)."""
    return [synthetic_item(i, seed)[0] for i in range(n_items)]
