"""The synthetic corpus's domains: what each body part x modality can say, and its codes.

MedEval covers chest X-rays and "35 body regions x 8 modalities". The synthetic corpus has six
domains: chest x-ray (the 14 CheXpert observations), foot/ankle x-ray (the paper's foot/ankle
codes) and four more with small code sets defined here, each ending in "No Finding":

=====================  ===========================================================================
knee x-ray             Fracture, Joint Effusion, Osteoarthritis, Chondrocalcinosis, Loose Body,
                       Dislocation, Hardware, No Finding
abdomen ultrasound     Cholelithiasis, Cholecystitis, Hepatic Steatosis, Liver Lesion,
                       Hydronephrosis, Ascites, Splenomegaly, No Finding
head ct                Hemorrhage, Infarct, Mass Effect, Hydrocephalus, Fracture, Sinus Disease,
                       No Finding
lumbar spine mri       Disc Herniation, Spinal Stenosis, Foraminal Narrowing, Compression Fracture,
                       Spondylolisthesis, Nerve Root Compression, No Finding
=====================  ===========================================================================

Each :class:`Finding` is one code's noun phrases (``{slot}`` placeholders filled from
:data:`SLOTS`) and the sentences that negate it. Every phrase names exactly one code, so a
report's codes follow from the phrases it uses. Codes with no phrase here (foot/ankle's
Psoriasis, Rheumatoid, CPDD, Nodule, Rupture) are always absent. :class:`Normal` sentences name no
code, or negate one in so many words (``negates``: "The heart size is normal." is Cardiomegaly
negative); one that merely contradicts a code ("The lungs are unremarkable." and an opacity)
lists it in ``excludes`` and leaves it absent. Those with a ``rewrite`` use jargon
("unremarkable", "low normal", "grossly", "anatomic") and are MedEval's first ambiguity kind,
with a faithful rewrite.
All of this text was written for clinieval; none of it comes from MedEval, MIMIC-CXR or Open-i.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from clinieval.benchmarks.medeval.items import CHEST, CHEXPERT_OBSERVATIONS, FOOT_ANKLE_CODES
from clinieval.benchmarks.medeval.tables import FOOT_ANKLE

__all__ = ["DOMAINS", "SLOTS", "Domain", "Finding", "Normal", "domain_codes"]

SLOTS: Mapping[str, tuple[str, ...]] = {
    "side": ("right", "left"),
    "size": ("small", "moderate", "large"),
    "degree": ("mild", "moderate", "severe"),
    "lobe": ("upper lobe", "lower lobe"),
    "rib": ("fourth", "fifth", "sixth", "seventh", "eighth"),
    "mm": ("4", "6", "8", "9", "12"),
    "cm": ("1.2", "1.8", "2.5", "3.1"),
    "spleen": ("14.2", "15.0", "16.4"),
    "shift": ("3", "5", "7"),
    "toe": ("second", "third", "fourth"),
    "foot_bone": ("lateral malleolus", "medial malleolus", "fifth metatarsal base", "calcaneus", "cuboid"),
    "malleolus": ("lateral", "medial"),
    "knee_bone": ("lateral tibial plateau", "patella", "medial femoral condyle", "fibular head"),
    "liver_lobe": ("right", "left"),
    "brain_lobe": ("frontal", "parietal", "temporal", "occipital"),
    "level": ("L3-L4", "L4-L5", "L5-S1"),
    "vertebra": ("T12", "L1", "L2", "L3"),
    "root": ("L4", "L5", "S1"),
    "series": tuple(str(n) for n in range(2, 10)),
    "image": tuple(str(n) for n in range(8, 241)),
    "clip": tuple(str(n) for n in range(1, 25)),
}
"""Values for the ``{slot}`` placeholders of the phrases and the views."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One code's phrases: noun phrases that state it, sentences that negate it."""

    code: str
    phrases: tuple[str, ...]
    negations: tuple[str, ...] = ()
    pathology: bool = True
    """False for devices and hardware: they do not make a report abnormal (CheXpert's No Finding
    ignores Support Devices) and are left out of the sentence-level corpus."""


@dataclass(frozen=True, slots=True)
class Normal:
    """A normal sentence: it negates ``negates`` (or nothing); with a ``rewrite`` it is jargon.

    ``excludes`` are the codes it contradicts without naming them ("Alignment is anatomic." and a
    dislocation): a report stating or hedging one of them never holds this sentence.
    """

    text: str
    negates: str | None = None
    rewrite: str | None = None
    excludes: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Domain:
    """One body part x modality: its codes, findings, normal sentences and report frame."""

    name: str
    codes: tuple[str, ...]
    findings: tuple[Finding, ...]
    normals: tuple[Normal, ...]
    acute: str
    """The domain's "acute abnormality" phrase, for contradictory sentences."""
    clean: str
    """The impression of a report without a pathology."""
    exam: str
    indications: tuple[str, ...]
    exclusive: tuple[frozenset[str], ...] = ()
    """Codes that never are positive together (they would contradict each other)."""
    studies: tuple[str, ...] = ("examination", "study")
    """What a sentence calls an earlier examination it compares with ("the radiograph of ...")."""
    views: tuple[str, ...] = ()
    """Where in the images a sentence looks ("on the lateral view"); ``{slot}`` placeholders are
    filled from :data:`SLOTS`. Neither these nor the comparisons change what a sentence finds."""


_LUNG = frozenset({"Lung Lesion", "Lung Opacity", "Edema", "Consolidation", "Pneumonia", "Atelectasis"})
_FOOT_ALIGNMENT = frozenset(
    {
        "Dislocation",
        "Subluxation",
        "Hallux Valgus",
        "Hammer Toe",
        "Metatarsus Primus Varus",
        "Pes Planus",
        "Pes Cavus",
    }
)
_FOOT_BONE = _FOOT_ALIGNMENT | {
    "Fracture",
    "Arthritis",
    "Gout",
    "Erosion",
    "Enthesopathy",
    "Osteomyelitis",
    "Osteonecrosis",
    "Coalition",
}
"""Codes a normal sentence about the lungs, the foot's alignment or its bones contradicts."""

_CHEST = Domain(
    name=CHEST,
    codes=CHEXPERT_OBSERVATIONS,
    findings=(
        Finding(
            "Enlarged Cardiomediastinum",
            ("widened mediastinum", "enlarged cardiomediastinal silhouette"),
            ("The mediastinum is not widened.",),
        ),
        Finding(
            "Cardiomegaly", ("{degree} cardiomegaly",), ("The heart size is normal.", "No cardiomegaly.")
        ),
        Finding(
            "Lung Lesion",
            ("{mm} mm nodule in the {side} {lobe}", "{side} {lobe} mass"),
            ("No pulmonary nodule.",),
        ),
        Finding(
            "Lung Opacity",
            ("{side} basilar opacity", "patchy opacity in the {side} {lobe}"),
            ("No focal opacity.",),
        ),
        Finding(
            "Edema", ("{degree} pulmonary edema", "{degree} interstitial edema"), ("No pulmonary edema.",)
        ),
        Finding("Consolidation", ("{side} {lobe} consolidation",), ("No focal consolidation.",)),
        Finding(
            "Pneumonia", ("{side} {lobe} pneumonia", "multifocal pneumonia"), ("No evidence of pneumonia.",)
        ),
        Finding(
            "Atelectasis",
            ("{side} basilar atelectasis", "{degree} bibasilar atelectasis"),
            ("No atelectasis.",),
        ),
        Finding(
            "Pneumothorax",
            ("{size} {side} pneumothorax", "{side} apical pneumothorax"),
            ("No pneumothorax.", "There is no pneumothorax."),
        ),
        Finding(
            "Pleural Effusion",
            ("{size} {side} pleural effusion", "{size} bilateral pleural effusions"),
            ("No pleural effusion.", "There is no pleural effusion."),
        ),
        Finding(
            "Pleural Other",
            ("{side} pleural thickening", "{side} apical pleural scarring"),
            ("No pleural thickening.",),
        ),
        Finding(
            "Fracture",
            ("healing fracture of the {side} {rib} rib", "acute fracture of the {side} clavicle"),
            ("No acute rib fracture.",),
        ),
        Finding(
            "Support Devices",
            (
                "right internal jugular central venous catheter with tip in the superior vena cava",
                "endotracheal tube with tip 4 cm above the carina",
                "left chest wall pacemaker with leads in the right atrium and right ventricle",
                "nasogastric tube with tip in the stomach",
            ),
            pathology=False,
        ),
    ),
    normals=(
        Normal("The trachea is midline."),
        Normal("The lungs are well expanded.", excludes=frozenset({"Atelectasis"})),
        Normal("The costophrenic angles are sharp.", negates="Pleural Effusion"),
        Normal(
            "The cardiomediastinal silhouette is normal.",
            negates="Enlarged Cardiomediastinum",
            excludes=frozenset({"Cardiomegaly"}),
        ),
        Normal("The lungs are unremarkable.", rewrite="The lungs are normal.", excludes=_LUNG),
        Normal(
            "The lung volumes are low normal.", rewrite="The lung volumes are in the lower range of normal."
        ),
        Normal(
            "The cardiomediastinal silhouette is unremarkable.",
            negates="Enlarged Cardiomediastinum",
            rewrite="The cardiomediastinal silhouette is normal.",
            excludes=frozenset({"Cardiomegaly"}),
        ),
        Normal(
            "Heart size is upper normal.",
            negates="Cardiomegaly",
            rewrite="Heart size is in the upper range of normal.",
        ),
        Normal(
            "The visualized osseous structures are unremarkable.",
            rewrite="The visualized bones are normal.",
            excludes=frozenset({"Fracture"}),
        ),
    ),
    acute="acute cardiopulmonary abnormality",
    clean="No acute cardiopulmonary process.",
    exam="CHEST (PA AND LAT)",
    indications=(
        "Cough.",
        "Shortness of breath.",
        "Chest pain.",
        "Preoperative evaluation.",
        "Fever and cough.",
    ),
    studies=("radiograph", "chest radiograph", "examination", "study"),
    views=(
        "on the frontal view",
        "on the lateral view",
        "on the PA view",
        "on the portable AP view",
        "on the PA and lateral views",
    ),
)

_FOOT_ANKLE = Domain(
    name=FOOT_ANKLE,
    codes=FOOT_ANKLE_CODES,
    findings=(
        Finding(
            "Fracture",
            ("nondisplaced fracture of the {foot_bone}", "minimally displaced fracture of the {foot_bone}"),
            ("No acute fracture.",),
        ),
        Finding("Dislocation", ("dislocation of the {toe} metatarsophalangeal joint",), ("No dislocation.",)),
        Finding("Subluxation", ("subluxation of the {toe} metatarsophalangeal joint",), ("No subluxation.",)),
        Finding(
            "Swelling",
            (
                "soft tissue swelling over the {malleolus} malleolus",
                "soft tissue swelling of the dorsal forefoot",
            ),
            ("No soft tissue swelling.",),
        ),
        Finding(
            "Arthritis",
            (
                "{degree} degenerative arthritis of the first metatarsophalangeal joint",
                "{degree} arthritis of the midfoot",
            ),
            ("No arthritis.",),
        ),
        Finding("Hallux Valgus", ("{degree} hallux valgus",), ("No hallux valgus.",)),
        Finding("Pes Planus", ("pes planus",), ("The longitudinal arch is maintained.",)),
        Finding("Gout", ("tophaceous gout at the first metatarsophalangeal joint",)),
        Finding("Erosion", ("marginal erosion of the {toe} metatarsal head",), ("No erosions.",)),
        Finding(
            "Enthesopathy",
            ("plantar calcaneal enthesophyte", "enthesopathy at the Achilles tendon insertion"),
        ),
        Finding("Hammer Toe", ("hammer toe deformity of the {toe} toe",)),
        Finding(
            "Osteomyelitis",
            ("osteomyelitis of the {toe} distal phalanx",),
            ("No radiographic evidence of osteomyelitis.",),
        ),
        Finding("Gas", ("soft tissue gas along the {toe} toe",), ("No soft tissue gas.",)),
        Finding("Mass", ("soft tissue mass along the dorsal midfoot",)),
        Finding("Osteonecrosis", ("osteonecrosis of the {toe} metatarsal head",)),
        Finding("Coalition", ("calcaneonavicular coalition",)),
        Finding("Metatarsus Primus Varus", ("metatarsus primus varus",)),
        Finding("Pes Cavus", ("pes cavus",)),
        Finding(
            "Hardware",
            (
                "intact plate and screw fixation of the distal fibula",
                "intact screw fixation across the first metatarsophalangeal joint",
            ),
            pathology=False,
        ),
    ),
    normals=(
        Normal("Bone mineralization is normal."),
        Normal("The ankle mortise is congruent."),
        Normal(
            "The osseous structures are unremarkable.", rewrite="The bones are normal.", excludes=_FOOT_BONE
        ),
        Normal("Alignment is anatomic.", rewrite="Alignment is normal.", excludes=_FOOT_ALIGNMENT),
        Normal(
            "The soft tissues are unremarkable.",
            rewrite="The soft tissues are normal.",
            excludes=frozenset({"Swelling", "Gas", "Mass"}),
        ),
    ),
    acute="acute osseous abnormality",
    clean="No acute osseous abnormality of the foot or ankle.",
    exam="FOOT AND ANKLE (THREE VIEWS)",
    indications=("Pain after a fall.", "Ankle injury.", "Foot pain.", "Follow-up."),
    exclusive=(frozenset({"Pes Planus", "Pes Cavus"}), frozenset({"Dislocation", "Subluxation"})),
    studies=("radiographs", "foot radiographs", "examination", "study"),
    views=("on the AP view", "on the oblique view", "on the lateral view", "on the mortise view"),
)

_KNEE = Domain(
    name="knee x-ray",
    codes=(
        "Fracture",
        "Joint Effusion",
        "Osteoarthritis",
        "Chondrocalcinosis",
        "Loose Body",
        "Dislocation",
        "Hardware",
        "No Finding",
    ),
    findings=(
        Finding("Fracture", ("nondisplaced fracture of the {knee_bone}",), ("No acute fracture.",)),
        Finding("Joint Effusion", ("{size} knee joint effusion",), ("No knee joint effusion.",)),
        Finding(
            "Osteoarthritis",
            ("{degree} medial compartment osteoarthritis", "{degree} tricompartmental osteoarthritis"),
            ("The joint spaces are preserved.",),
        ),
        Finding("Chondrocalcinosis", ("chondrocalcinosis of the menisci",)),
        Finding("Loose Body", ("small intra-articular loose body",), ("No intra-articular loose body.",)),
        Finding("Dislocation", ("lateral patellar dislocation",), ("No dislocation.",)),
        Finding(
            "Hardware",
            ("intact total knee arthroplasty components", "intact screws in the proximal tibia"),
            pathology=False,
        ),
    ),
    normals=(
        Normal("Bone mineralization is normal."),
        Normal(
            "The soft tissues are unremarkable.",
            rewrite="The soft tissues are normal.",
            excludes=frozenset({"Joint Effusion"}),
        ),
        Normal("Alignment is anatomic.", rewrite="Alignment is normal.", excludes=frozenset({"Dislocation"})),
    ),
    acute="acute osseous abnormality",
    clean="No acute osseous abnormality of the knee.",
    exam="KNEE (THREE VIEWS)",
    indications=("Knee pain.", "Injury while running.", "Follow-up."),
    studies=("radiographs", "knee radiographs", "examination", "study"),
    views=("on the AP view", "on the lateral view", "on the sunrise view", "on the tunnel view"),
)

_ABDOMEN = Domain(
    name="abdomen ultrasound",
    codes=(
        "Cholelithiasis",
        "Cholecystitis",
        "Hepatic Steatosis",
        "Liver Lesion",
        "Hydronephrosis",
        "Ascites",
        "Splenomegaly",
        "No Finding",
    ),
    findings=(
        Finding("Cholelithiasis", ("cholelithiasis", "multiple gallstones"), ("No gallstones.",)),
        Finding("Cholecystitis", ("acute cholecystitis",), ("No sonographic evidence of cholecystitis.",)),
        Finding("Hepatic Steatosis", ("{degree} hepatic steatosis",), ("The liver echotexture is normal.",)),
        Finding(
            "Liver Lesion",
            ("{cm} cm hypoechoic lesion in the {liver_lobe} lobe of the liver",),
            ("No focal liver lesion.",),
        ),
        Finding("Hydronephrosis", ("{degree} {side} hydronephrosis",), ("No hydronephrosis.",)),
        Finding("Ascites", ("{size} volume ascites",), ("No ascites.",)),
        Finding(
            "Splenomegaly",
            ("splenomegaly with the spleen measuring {spleen} cm",),
            ("The spleen is normal in size.",),
        ),
    ),
    normals=(
        Normal("The common bile duct measures 4 mm."),
        Normal("The abdominal aorta is normal in caliber."),
        Normal(
            "The gallbladder is unremarkable.",
            rewrite="The gallbladder is normal.",
            excludes=frozenset({"Cholelithiasis", "Cholecystitis"}),
        ),
        Normal(
            "The kidneys are unremarkable.",
            rewrite="The kidneys are normal.",
            excludes=frozenset({"Hydronephrosis"}),
        ),
        Normal("The pancreas is grossly unremarkable.", rewrite="The visualized pancreas is normal."),
    ),
    acute="acute abdominal abnormality",
    clean="Normal abdominal ultrasound.",
    exam="ULTRASOUND ABDOMEN COMPLETE",
    indications=("Abdominal pain.", "Right upper quadrant pain.", "Nausea."),
    studies=("ultrasound", "sonogram", "examination", "study"),
    views=("on the sagittal images", "on the transverse images", "on cine clip {clip}"),
)

_HEAD = Domain(
    name="head ct",
    codes=(
        "Hemorrhage",
        "Infarct",
        "Mass Effect",
        "Hydrocephalus",
        "Fracture",
        "Sinus Disease",
        "No Finding",
    ),
    findings=(
        Finding(
            "Hemorrhage",
            (
                "{size} intraparenchymal hemorrhage in the {side} {brain_lobe} lobe",
                "subarachnoid hemorrhage in the {side} sylvian fissure",
            ),
            ("No intracranial hemorrhage.",),
        ),
        Finding(
            "Infarct",
            (
                "acute infarct in the {side} middle cerebral artery territory",
                "chronic lacunar infarct in the {side} thalamus",
            ),
            ("No evidence of acute infarct.",),
        ),
        Finding(
            "Mass Effect",
            ("{degree} mass effect with {shift} mm of midline shift",),
            ("No mass effect or midline shift.",),
        ),
        Finding("Hydrocephalus", ("communicating hydrocephalus",), ("No hydrocephalus.",)),
        Finding(
            "Fracture",
            ("nondisplaced fracture of the {side} {brain_lobe} bone",),
            ("No calvarial fracture.",),
        ),
        Finding(
            "Sinus Disease",
            ("mucosal thickening in the {side} maxillary sinus",),
            ("The paranasal sinuses are clear.",),
        ),
    ),
    normals=(
        Normal("The gray-white matter differentiation is preserved.", excludes=frozenset({"Infarct"})),
        Normal("The basal cisterns are patent.", excludes=frozenset({"Mass Effect"})),
        Normal("The orbits are unremarkable.", rewrite="The orbits are normal."),
        Normal(
            "The calvarium is grossly intact.",
            rewrite="The calvarium appears intact.",
            excludes=frozenset({"Fracture"}),
        ),
        Normal(
            "The ventricles are unremarkable in size.",
            negates="Hydrocephalus",
            rewrite="The ventricles are normal in size.",
        ),
    ),
    acute="acute intracranial abnormality",
    clean="No acute intracranial abnormality.",
    exam="CT HEAD WITHOUT CONTRAST",
    indications=("Headache.", "Fall with head strike.", "Dizziness."),
    studies=("CT", "head CT", "examination", "study"),
    views=("on image {image} of series {series}", "on the axial images", "on the coronal reformats"),
)

_LUMBAR = Domain(
    name="lumbar spine mri",
    codes=(
        "Disc Herniation",
        "Spinal Stenosis",
        "Foraminal Narrowing",
        "Compression Fracture",
        "Spondylolisthesis",
        "Nerve Root Compression",
        "No Finding",
    ),
    findings=(
        Finding(
            "Disc Herniation",
            ("{side} paracentral disc herniation at {level}", "broad-based disc protrusion at {level}"),
            ("No disc herniation.",),
        ),
        Finding(
            "Spinal Stenosis", ("{degree} spinal canal stenosis at {level}",), ("No spinal canal stenosis.",)
        ),
        Finding(
            "Foraminal Narrowing",
            ("{degree} {side} neural foraminal narrowing at {level}",),
            ("The neural foramina are patent.",),
        ),
        Finding(
            "Compression Fracture",
            ("acute compression fracture of the {vertebra} vertebral body",),
            ("Vertebral body heights are maintained.",),
        ),
        Finding(
            "Spondylolisthesis",
            ("grade 1 anterolisthesis of L4 on L5", "grade 1 anterolisthesis of L5 on S1"),
            ("No spondylolisthesis.",),
        ),
        Finding(
            "Nerve Root Compression",
            ("compression of the traversing {side} {root} nerve root",),
            ("No nerve root compression.",),
        ),
    ),
    normals=(
        Normal("The conus medullaris terminates at L1."),
        Normal("Bone marrow signal is normal.", excludes=frozenset({"Compression Fracture"})),
        Normal(
            "The paraspinal soft tissues are unremarkable.", rewrite="The paraspinal soft tissues are normal."
        ),
        Normal(
            "Alignment is anatomic.",
            rewrite="Alignment is normal.",
            excludes=frozenset({"Spondylolisthesis"}),
        ),
    ),
    acute="acute abnormality",
    clean="No acute abnormality of the lumbar spine.",
    exam="MRI LUMBAR SPINE WITHOUT CONTRAST",
    indications=("Low back pain.", "Radiating leg pain.", "Back pain after lifting."),
    studies=("MRI", "lumbar spine MRI", "examination", "study"),
    views=(
        "on the sagittal T2-weighted images",
        "on the axial T2-weighted images",
        "on the sagittal T1-weighted images",
        "on image {image} of series {series}",
    ),
)

DOMAINS: tuple[Domain, ...] = (_CHEST, _FOOT_ANKLE, _KNEE, _ABDOMEN, _HEAD, _LUMBAR)
"""The corpus's domains; chest comes first and is drawn most often (:mod:`.corpus`)."""


def domain_codes() -> dict[str, tuple[str, ...]]:
    """Each domain's full code set (what ``observations.json`` records)."""
    return {d.name: d.codes for d in DOMAINS}
