"""Clinical knowledge: what each condition brings to a synthetic patient's record.

The generator's rules, as data: the drugs each chronic condition is treated with, the labs drawn
to follow it and how far it moves them, how likely it is at a given age, the reasons for
emergency visits and admissions (complaint, examination, labs, procedures, treatment, course),
and the phrases notes use per condition. Kept apart from the code catalogues (which say what a
code *is*) and from the generator (which draws from these rules), so either can be read alone.
"""

from __future__ import annotations

from dataclasses import dataclass

# drugs started at diagnosis (first) and added when the condition is not controlled (rest)
CHRONIC_DRUGS: dict[str, tuple[str, ...]] = {
    "diabetes": ("metformin", "insulin_lispro"),
    "hypertension": ("lisinopril", "amlodipine", "hctz"),
    "hyperlipidemia": ("atorvastatin",),
    "heart_failure": ("furosemide", "carvedilol"),
    "atrial_fibrillation": ("warfarin",),
    "cad": ("aspirin", "nitroglycerin"),
    "asthma": ("albuterol", "fluticasone"),
    "ckd": ("losartan",),
    "depression": ("sertraline",),
}
# labs drawn to follow the condition
CHRONIC_LABS: dict[str, tuple[str, ...]] = {
    "diabetes": ("2345-7", "4548-4", "2160-0"),
    "hypertension": ("2160-0", "2823-3", "2951-2"),
    "hyperlipidemia": ("2093-3", "2085-9", "2571-8"),
    "heart_failure": ("2951-2", "2823-3", "2160-0", "3094-0"),
    "atrial_fibrillation": ("718-7", "777-3"),
    "cad": ("2093-3", "2085-9"),
    "asthma": ("6690-2",),
    "ckd": ("2160-0", "3094-0", "2823-3", "718-7"),
    "depression": (),
}
# (mean, sd) a condition moves a lab to while untreated; treatment halves the distance to normal
LAB_EFFECTS: dict[str, dict[str, tuple[float, float]]] = {
    "diabetes": {"2345-7": (175, 35), "4548-4": (8.4, 1.0)},
    "hypertension": {"8480-6": (150, 10), "8462-4": (94, 6)},
    "hyperlipidemia": {"2093-3": (245, 25), "2085-9": (38, 6), "2571-8": (220, 50)},
    "heart_failure": {"2951-2": (134, 2.5), "8867-4": (88, 8), "3094-0": (26, 6)},
    "atrial_fibrillation": {"8867-4": (102, 14)},
    "ckd": {"2160-0": (1.9, 0.3), "3094-0": (34, 7), "2823-3": (5.0, 0.35), "718-7": (11.2, 0.9)},
    "asthma": {"59408-5": (95.5, 1.2)},
    "pneumonia": {
        "6690-2": (15.5, 3.0),
        "8310-5": (38.7, 0.5),
        "59408-5": (90, 2.5),
        "9279-1": (24, 3),
        "8867-4": (106, 10),
    },
    "bronchitis": {"8310-5": (37.8, 0.4), "9279-1": (19, 2)},
    "strep": {"8310-5": (38.6, 0.5), "6690-2": (13, 2.5), "8867-4": (98, 8)},
    "cystitis": {"6690-2": (10.5, 2.0)},
    "ankle_sprain": {"8867-4": (84, 8)},
    "dyspnea": {"59408-5": (92, 2), "9279-1": (22, 3), "8867-4": (96, 10)},
    "mi": {"8867-4": (98, 12), "8480-6": (152, 18), "6690-2": (11.5, 2), "2345-7": (160, 30)},
    "stroke": {"8480-6": (172, 14), "8462-4": (98, 8), "2345-7": (140, 25)},
}

# age-dependent yearly-ish prevalence used once per patient: base + slope * max(age - 40, 0)
CHRONIC_RISK: dict[str, tuple[float, float]] = {
    "hypertension": (0.12, 0.012),
    "hyperlipidemia": (0.10, 0.010),
    "diabetes": (0.06, 0.006),
    "cad": (0.01, 0.004),
    "heart_failure": (0.005, 0.003),
    "atrial_fibrillation": (0.005, 0.003),
    "ckd": (0.01, 0.003),
    "asthma": (0.08, 0.0),
    "depression": (0.09, 0.0),
}

VITALS = ("8480-6", "8462-4", "8867-4", "9279-1", "8310-5", "59408-5")
BMP = ("2345-7", "2160-0", "3094-0", "2951-2", "2823-3")
CBC = ("718-7", "6690-2", "777-3")


@dataclass(frozen=True, slots=True)
class Reason:
    """Why a patient came to the emergency department or was admitted."""

    condition: str
    complaint: str
    hpi: str
    exam: str
    labs: tuple[str, ...]
    procedures: tuple[str, ...]
    treat: tuple[str, ...]  # given during the visit
    discharge: tuple[str, ...]  # prescribed at discharge
    course: str


ER_REASONS: dict[str, Reason] = {
    "bronchitis": Reason(
        "bronchitis",
        "cough",
        "a productive cough for {d} days with chest tightness and low-grade fever",
        "scattered rhonchi without focal consolidation",
        ("6690-2",),
        ("cxr",),
        ("acetaminophen",),
        ("azithromycin",),
        "A chest X-ray showed no consolidation.",
    ),
    "strep": Reason(
        "strep",
        "sore throat",
        "a sore throat and painful swallowing for {d} days with fever",
        "tonsillar exudates and tender anterior cervical lymph nodes; rapid streptococcal antigen positive",
        ("6690-2",),
        (),
        ("acetaminophen",),
        ("amoxicillin",),
        "The rapid strep test was positive.",
    ),
    "cystitis": Reason(
        "cystitis",
        "burning on urination",
        "dysuria, urinary frequency and suprapubic discomfort for {d} days",
        "mild suprapubic tenderness, no costovertebral angle tenderness",
        ("6690-2", "2160-0"),
        (),
        (),
        ("nitrofurantoin",),
        "Urinalysis showed leukocyte esterase and nitrites.",
    ),
    "ankle_sprain": Reason(
        "ankle_sprain",
        "ankle pain",
        "an inversion injury of the ankle {d} days ago with swelling and pain on weight bearing",
        "lateral ankle swelling and tenderness over the anterior talofibular ligament",
        (),
        (),
        ("ibuprofen",),
        ("naproxen",),
        "Ottawa ankle rules were negative; no imaging was required.",
    ),
    "dyspnea": Reason(
        "dyspnea",
        "shortness of breath",
        "worsening shortness of breath for {d} days",
        "bibasilar crackles and mild expiratory wheeze",
        ("6690-2", "2951-2", "2160-0"),
        ("cxr", "ecg"),
        ("albuterol",),
        ("prednisone",),
        "Symptoms improved after bronchodilator treatment.",
    ),
}

IP_REASONS: dict[str, Reason] = {
    "pneumonia": Reason(
        "pneumonia",
        "fever and cough",
        "fever, productive cough and pleuritic chest pain for {d} days",
        "crackles over the right lower lobe with dullness to percussion",
        BMP + CBC,
        ("cxr", "oxygen"),
        ("ceftriaxone", "acetaminophen", "enoxaparin"),
        ("amox_clav",),
        "The chest X-ray showed a right lower lobe consolidation. {p} was started on intravenous ceftriaxone "
        "and supplemental oxygen, defervesced within 48 hours and was weaned to room air before discharge, "
        "then switched to oral amoxicillin-clavulanate to complete the course.",
    ),
    "mi": Reason(
        "mi",
        "chest pain",
        "substernal chest pressure radiating to the left arm for {d} hours with diaphoresis",
        "diaphoretic, regular rhythm, no murmur",
        BMP + CBC,
        ("ecg", "echo"),
        ("aspirin", "clopidogrel", "morphine", "nitroglycerin", "enoxaparin"),
        ("aspirin", "clopidogrel", "atorvastatin"),
        "The ECG showed ST-segment changes and troponin was elevated. {p} was treated for acute coronary "
        "syndrome with aspirin, clopidogrel and anticoagulation; the echocardiogram showed preserved "
        "systolic function with an inferior wall motion abnormality. Chest pain resolved and did not recur.",
    ),
    "stroke": Reason(
        "stroke",
        "right-sided weakness",
        "acute right arm and leg weakness with slurred speech that began {d} hours before arrival",
        "right hemiparesis and expressive aphasia",
        BMP + CBC,
        ("ecg", "echo"),
        ("alteplase", "enoxaparin"),
        ("aspirin", "clopidogrel", "atorvastatin"),
        "Imaging confirmed an acute ischemic stroke. {p} received intravenous alteplase within the treatment "
        "window and was monitored in the stroke unit. Weakness partially improved; physical and speech "
        "therapy were started and dual antiplatelet therapy was begun for secondary prevention.",
    ),
    "heart_failure": Reason(
        "heart_failure",
        "leg swelling and shortness of breath",
        "progressive dyspnea on exertion, orthopnea and a weight gain of about {d} kg over two weeks",
        "jugular venous distension, bibasilar crackles and pitting edema to the knees",
        BMP + CBC,
        ("cxr", "echo", "ecg"),
        ("furosemide_iv", "enoxaparin"),
        ("furosemide", "carvedilol"),
        "{p} was admitted with acute decompensated heart failure and diuresed with intravenous furosemide, "
        "with a net negative fluid balance and resolution of orthopnea. The echocardiogram showed a reduced "
        "ejection fraction. {P2} was transitioned to oral furosemide and carvedilol was continued.",
    ),
}

# patient-facing phrases per chronic condition, for notes
HPI_LINES: dict[str, tuple[str, ...]] = {
    "diabetes": (
        "Checks blood sugars at home, mostly between 120 and 200.",
        "Denies polyuria or polydipsia.",
        "Reports occasional numbness in the feet.",
        "Admits to difficulty following the diabetic diet.",
    ),
    "hypertension": (
        "Home blood pressure readings have been in the 140s systolic.",
        "Denies headache or visual changes.",
        "Reports good adherence to antihypertensive medication.",
    ),
    "hyperlipidemia": (
        "Tolerating statin without myalgias.",
        "Has been trying to reduce dietary fat intake.",
    ),
    "heart_failure": (
        "Sleeps on two pillows.",
        "Reports stable exercise tolerance of about one block.",
        "Weighs self daily; no recent weight gain.",
    ),
    "atrial_fibrillation": ("Occasional palpitations, no syncope.", "INR checks have been mostly in range."),
    "cad": ("No exertional chest pain since the last visit.", "Uses nitroglycerin rarely."),
    "asthma": ("Uses rescue inhaler about twice a week.", "Symptoms worse with cold air and exercise."),
    "ckd": ("Avoids NSAIDs as advised.", "No change in urine output."),
    "depression": (
        "Mood improved on sertraline.",
        "Sleeping better; PHQ-9 score has decreased.",
        "Reports low energy and poor concentration.",
    ),
}
PLAN_LINES: dict[str, tuple[str, ...]] = {
    "diabetes": (
        "Reinforced diet and exercise counselling; annual retinal examination and foot care reviewed.",
        "Goal hemoglobin A1c below 7 percent.",
    ),
    "hypertension": (
        "Low-sodium diet advised; recheck blood pressure at next visit.",
        "Target blood pressure below 130/80 mm[Hg].",
    ),
    "hyperlipidemia": ("Continue high-intensity statin; repeat lipid panel in 12 months.",),
    "heart_failure": ("Daily weights, fluid restriction to 2 liters and sodium restriction discussed.",),
    "atrial_fibrillation": ("Continue anticoagulation; CHA2DS2-VASc reviewed.",),
    "cad": ("Continue antiplatelet therapy and statin; cardiac rehabilitation encouraged.",),
    "asthma": ("Inhaler technique reviewed; asthma action plan updated.",),
    "ckd": ("Monitor renal function and potassium every 3 to 6 months; avoid nephrotoxic drugs.",),
    "depression": ("Continue sertraline; safety screening negative; follow up with behavioral health.",),
}
