"""The signature catalogue (data: catalogue.toml) and the fast line matcher built on it."""

from trainmedic.core.signatures.catalogue import (
    ALLOWED_GROUPS,
    Catalogue,
    Signature,
    XidRule,
    load_catalogue,
)
from trainmedic.core.signatures.matcher import Hit, Matcher, default_matcher, normalize_pci

__all__ = [
    "ALLOWED_GROUPS",
    "Catalogue",
    "Hit",
    "Matcher",
    "Signature",
    "XidRule",
    "default_matcher",
    "load_catalogue",
    "normalize_pci",
]
