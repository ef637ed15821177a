# A name for the study's own folder (results/studies/<key>/, STUDY_DIR: common.smk, or domains.smk
# for a study across domains): when a run finishes, results/studies/<name> points at it, <name> being
# the run's config files (smoke, smoke+smoke-recipe; default without any).
import os
from pathlib import Path

from snakemake.logging import logger


def study_name():
    """The run's --configfile files by name, joined by '+' ('default' without any)."""
    return "+".join(Path(path).stem for path in workflow.overwrite_configfiles or ()) or "default"


def point_to_study():
    """results/studies/<name> -> <key>: replaced atomically, so it always names one study's folder."""
    folder = Path(STUDY_DIR)
    if not folder.is_dir():  # a run that stopped short of the tables (`snakemake dedup`)
        return
    link = folder.with_name(study_name())
    if link.exists() and not link.is_symlink():
        logger.warning(f"{link} is not a link to a study's folder: left as it is")
        return
    staged = link.with_name(f".{link.name}.link")
    staged.unlink(missing_ok=True)
    staged.symlink_to(folder.name)
    os.replace(staged, link)
    logger.info(f"this study's tables and figures: {folder}/ (and {link}/)")


onsuccess:
    point_to_study()
