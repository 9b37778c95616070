"""A synthetic judge-evaluation set whose physician ratings are computable, and not word overlap.

No patient data and no real physicians: every item is a patient question about one of a dozen
common conditions, a reference answer holding its key facts in textbook wording, and three
responses built from known parts — which key facts each states, in the reference's words or in
its own (a paraphrase), how many wrong statements it adds (blatant ones, and *near misses* that
copy the reference's wording with one critical detail wrong: a dose, a threshold, a drug), whether
it is padded with general advice, and whether it is written as broken fragments. The
"physicians'" ratings follow a stated rule about what the response says, never how it is worded,
plus seeded disagreement between three raters:

* relevancy   = 1 + round(4 x key facts stated / key facts), a paraphrase counting as stated
* correctness = relevancy - 2 x wrong statements (blatant or near miss), at least 1
* fluency     = 5, or 2 for a response written as fragments
* each rater moves each criterion by -1, 0 or +1 (25 %, 50 %, 25 %), kept within 1-5; chosen so
  the raters agree about as well as the paper's five physicians did (ICC2 about 0.8; paper 0.71).

Three response styles stand for three models of different quality: ``careful`` (most facts, mostly
in its own words, no errors, often padded with general advice: long), ``terse`` (about half the
facts, close to the textbook wording, sometimes fragments) and ``confident`` (most facts in the
textbook's own words, often a near miss, sometimes a blatant error or fragments). Word overlap
with the reference therefore under-rates the careful answers and over-rates the confident ones'
near misses: an overlap judge lands where overlap honestly lands, instead of near an oracle as when
every response was made of the reference's own sentences. The reference rationale states the
counts, for the rationale-quality check. The three answers come in a seeded order per item, so
no model is always shown first. This is a harness check, not a medical benchmark.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from clinieval.benchmarks.automedeval.judge_set import JudgeItem, Rating, Response


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
PADDING = (
    "Everyone's situation is a little different, so advice has to fit the person.",
    "It can help to write your questions down before an appointment.",
    "Bringing a list of all your medicines to each visit is a good habit.",
    "A family member can come along to help remember what was said.",
    "Reliable health information is available from your local health service.",
    "Looking after sleep, diet and activity helps with most long-term conditions.",
)
"""General advice a padded answer adds: true, harmless, and about none of the key facts."""


@dataclass(frozen=True, slots=True)
class Variants:
    """A condition's key facts in a patient-friendly paraphrase (same order as its facts), and its
    near misses: the reference's own wording with one critical detail wrong."""

    paraphrases: tuple[str, ...]
    near_misses: tuple[str, ...]


VARIANTS: tuple[Variants, ...] = (
    Variants(  # hypertension
        (
            "Readings that stay over 130 over 80 on several occasions are what doctors call hypertension.",
            "Less salt, shedding extra weight and staying active all bring the numbers down.",
            "Doctors usually start with a water tablet, an ACE inhibitor or a calcium blocker.",
            "Left alone, raised pressure makes strokes, heart attacks and kidney damage more likely.",
        ),
        (
            "Blood pressure above 160/100 mmHg on repeated readings counts as hypertension.",
            "First-line medicines include thiazide diuretics, ACE inhibitors and potassium supplements.",
        ),
    ),
    Variants(  # type 2 diabetes
        (
            "Most doctors begin treatment with metformin tablets.",
            "A blood test of average sugar over the last months is repeated a few times a year.",
            "Eating better, losing some weight and moving more all help the sugar levels.",
            "Annual checks of the eyes, feet and kidneys find problems before they get serious.",
        ),
        (
            "Metformin is the usual first medicine for type 1 diabetes.",
            "HbA1c is checked every three to six years to follow glucose control.",
        ),
    ),
    Variants(  # urinary tract infection
        (
            "A simple bladder infection in a woman usually clears with a few days of an antibiotic "
            "like nitrofurantoin.",
            "Plenty to drink helps wash the bladder out.",
            "A high temperature, pain in the side or being sick may mean the kidneys are involved, "
            "which is urgent.",
            "If infections keep coming back, a lab test of the urine shows which antibiotic will work.",
        ),
        (
            "Uncomplicated bladder infections in women are treated with long antibiotic courses of "
            "three months.",
            "Fever, flank pain or vomiting are normal with a bladder infection and need no care.",
        ),
    ),
    Variants(  # heartburn
        (
            "Heartburn on most days usually means acid is coming back up from the stomach (reflux).",
            "Eating earlier in the evening and sleeping with the head propped up often help.",
            "Tablets like omeprazole cut down how much acid the stomach makes.",
            "Difficulty swallowing, losing weight or bringing up blood should be checked quickly.",
        ),
        (
            "Proton pump inhibitors such as omeprazole increase stomach acid.",
            "Avoiding late meals and lowering the head of the bed reduce symptoms.",
        ),
    ),
    Variants(  # child fever
        (
            "Paracetamol or ibuprofen, dosed for the child's weight, make a feverish child more comfortable.",
            "Any fever in an infant younger than three months should be seen by a doctor straight away.",
            "Warning signs are a stiff neck, a rash that stays when pressed with a glass, or unusual "
            "sleepiness.",
            "Keep offering drinks so the child does not dry out.",
        ),
        (
            "A fever in a baby under three years old needs urgent medical review.",
            "Paracetamol or aspirin in weight-based doses relieve fever discomfort.",
        ),
    ),
    Variants(  # migraine
        (
            "A triptan taken at the first sign of an attack can stop it.",
            "For milder attacks ordinary painkillers like ibuprofen are often enough.",
            "Writing down each headache can show triggers such as skipped meals or little sleep.",
            "When attacks are frequent, a daily preventive such as propranolol or topiramate helps.",
        ),
        (
            "Triptans taken daily between attacks can stop a migraine.",
            "Frequent migraines can be prevented with daily opioids such as codeine.",
        ),
    ),
    Variants(  # stroke
        (
            "A drooping face, a weak arm and slurred speech are the classic signs.",
            "Ring for an ambulance straight away: clot-busting treatment only works in the first hours.",
            "Write down when the symptoms began, because that decides the treatment.",
            "Raised blood pressure, an irregular heartbeat and smoking all make a stroke more likely.",
        ),
        (
            "Call emergency services within a day because clot treatment works for several days.",
            "Face drooping, arm weakness and slurred speech are harmless signs that pass by themselves.",
        ),
    ),
    Variants(  # asthma
        (
            "The blue reliever, salbutamol, relaxes the airways within minutes.",
            "The steroid preventer calms the swelling inside the airways if taken every day.",
            "A spacer device gets more of each puff down into the lungs.",
            "Reaching for the reliever more than twice a week is a sign the asthma is poorly controlled.",
        ),
        (
            "A reliever inhaler such as salbutamol should replace the preventer inhaler entirely.",
            "Needing the reliever more than twice a day means the asthma is well controlled.",
        ),
    ),
    Variants(  # low iron
        (
            "Iron tablets by mouth are the usual treatment for this kind of anaemia.",
            "Iron is absorbed better with some vitamin C and not at the same time as tea.",
            "Doctors should find out why iron was lost, for example heavy periods or bleeding in the gut.",
            "A blood count is checked again after several weeks on iron.",
        ),
        (
            "Taking iron with tea and away from vitamin C improves absorption.",
            "Iron deficiency anaemia is treated with vitamin B12 injections.",
        ),
    ),
    Variants(  # cholesterol
        (
            "Statin tablets bring the bad cholesterol down and prevent heart attacks.",
            "Cutting back on fatty meat and butter and eating more fibre helps.",
            "Whether to treat is decided on the whole picture of heart risk, not the number alone.",
            "Tell your doctor if your muscles ache while taking a statin.",
        ),
        (
            "Statins raise LDL cholesterol and the risk of heart attack.",
            "Muscle pain on a statin is expected and never needs to be reported.",
        ),
    ),
    Variants(  # flu
        (
            "Most people get over flu in one to two weeks with rest, drinks and paracetamol.",
            "For people at higher risk, oseltamivir works best if it is started in the first two days.",
            "Being short of breath or having chest pain with flu means you should be seen.",
            "Having the flu jab every year lowers your chance of catching it.",
        ),
        (
            "Antiviral medicines such as oseltamivir help most when started after two weeks of illness.",
            "Antibiotics such as amoxicillin help most people recover from flu within a week or two.",
        ),
    ),
    Variants(  # ankle sprain
        (
            "Resting it, cooling it, wrapping it and keeping it raised bring the swelling down.",
            "If you cannot put weight on it or the bone is sore to touch, it may be broken and needs "
            "an X-ray.",
            "Start moving it gently after a few days to recover faster.",
            "Most sprains get better within a few weeks.",
        ),
        (
            "Rest, heat, compression and lowering the foot reduce swelling after a sprain.",
            "Being unable to bear weight or bone tenderness is normal and never needs an X-ray.",
        ),
    ),
)

assert len(VARIANTS) == len(CONDITIONS) and all(
    len(v.paraphrases) == len(c.facts) for v, c in zip(VARIANTS, CONDITIONS, strict=True)
)


@dataclass(frozen=True, slots=True)
class Style:
    """How one synthetic model answers: facts stated (choices), the chance of one blatant error, of
    fragments, of one near miss, of a fact being put in its own words, and sentences of padding."""

    name: str
    facts: tuple[int, ...]
    error_chance: float
    fragment_chance: float
    near_miss_chance: float = 0.0
    paraphrase_chance: float = 0.0
    padding: tuple[int, ...] = (0,)


STYLES: tuple[Style, ...] = (
    Style("careful", (3, 4, 4), 0.0, 0.0, 0.0, 0.8, (1, 2, 3)),
    Style("terse", (1, 2, 2), 0.0, 0.1, 0.0, 0.2),
    Style("confident", (3, 3, 4), 0.2, 0.2, 0.6, 0.0, (0, 1)),
)

PHYSICIANS: tuple[str, ...] = ("dr_a", "dr_b", "dr_c")


@dataclass(frozen=True, slots=True)
class Built:
    """What a response was built from (the numbers its true ratings come from)."""

    facts: int
    errors: int
    fragments: bool
    near_misses: int = 0
    paraphrased: int = 0
    """How many of the stated facts are in the response's own words (the rating does not care)."""
    padding: int = 0

    @property
    def wrong(self) -> int:
        """Wrong statements of either kind."""
        return self.errors + self.near_misses


def true_rating(built: Built, key_facts: int) -> Rating:
    """The rating rule (see the module docstring): what a rater without noise would give."""
    relevancy = 1 + round(4 * built.facts / key_facts)
    return Rating(relevancy, 2 if built.fragments else 5, max(1, relevancy - 2 * built.wrong))


def _noisy(rating: Rating, rng: random.Random) -> Rating:
    def move(v: int) -> int:
        return min(5, max(1, v + rng.choices((-1, 0, 1), (0.25, 0.5, 0.25))[0]))

    return Rating(move(rating.relevancy), move(rating.fluency), move(rating.correctness))


def _text(condition: Condition, variants: Variants, built: Built, rng: random.Random) -> str:
    chosen = rng.sample(range(len(condition.facts)), built.facts)
    own = set(rng.sample(chosen, built.paraphrased))
    parts = [variants.paraphrases[i] if i in own else condition.facts[i] for i in chosen]
    parts += rng.sample(list(condition.errors), built.errors)
    parts += rng.sample(list(variants.near_misses), built.near_misses)
    rng.shuffle(parts)
    parts += rng.sample(PADDING, built.padding)
    if built.fragments:
        # fragments: each statement cut to its first words, no sentence structure
        parts = [" ".join(p.rstrip(".").split()[:6]).lower() + " ..." for p in parts]
    else:
        parts.append(rng.choice(FILLERS))
    return " ".join(parts)


def _rationale(built: list[Built], key_facts: int) -> str:
    steps = [
        f"Doctor {i} states {b.facts} of the {key_facts} key points"
        + (f" and {b.wrong} incorrect claim{'s' * (b.wrong != 1)}" if b.wrong else " with no incorrect claim")
        + (", written as fragments." if b.fragments else ".")
        for i, b in enumerate(built, 1)
    ]
    return "Analyze: " + " ".join(f"Step {n}: {s}" for n, s in enumerate(steps, 1))


def _build(style: Style, rng: random.Random) -> Built:
    facts = rng.choice(style.facts)
    return Built(
        facts,
        int(rng.random() < style.error_chance),
        rng.random() < style.fragment_chance,
        near_misses=int(rng.random() < style.near_miss_chance),
        paraphrased=sum(rng.random() < style.paraphrase_chance for _ in range(facts)),
        padding=rng.choice(style.padding),
    )


def synthetic_item(index: int, seed: int = 0) -> tuple[JudgeItem, list[Built]]:
    """Item ``index`` of the set, and what each of its responses was built from."""
    rng = random.Random(f"automedeval-synth:{seed}:{index}")
    condition = CONDITIONS[index % len(CONDITIONS)]
    variants = VARIANTS[index % len(CONDITIONS)]
    k = len(condition.facts)
    built = [_build(s, rng) for s in STYLES]
    made = [
        Response(
            style.name,
            _text(condition, variants, b, rng),
            {p: _noisy(true_rating(b, k), rng) for p in PHYSICIANS},
        )
        for style, b in zip(STYLES, built, strict=True)
    ]
    # the models answer in a seeded order per item: were the best always Doctor 1, a judge that
    # favours the first answer would look like a good judge under the paper's fixed order
    order = random.Random(f"automedeval-synth-order:{seed}:{index}").sample(range(len(STYLES)), len(STYLES))
    responses = tuple(made[i] for i in order)
    built = [built[i] for i in order]
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
