"""The people who rate: Label Studio users FairJudge creates and lists with their progress.

Users created through the API get no password, and may have no organization (the client
puts them in the admin's). On FairJudge's own server the person is signed up through the
organization's invite link with a random password, returned once, so they can log in at once
(one HTTP exchange, where setting a password afterwards is a Django command of about 7 s);
on a server you run yourself, an admin of that server gives the person a password (the
message says so).
"""

from __future__ import annotations

import secrets
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, col, func, select

from annotation.errors import CampaignError
from annotation.labelstudio.client import LabelStudioClient
from annotation.labelstudio.service import LabelStudioService
from judge.store.tables import Annotator, Campaign, CampaignTask, HumanRating


@dataclass(frozen=True)
class NewAnnotator:
    email: str
    user_id: int
    url: str
    password: str | None  # set on FairJudge's own server; shown once, never stored
    created: bool

    def login_text(self) -> str:
        if not self.created:
            return f"{self.email} already has a Label Studio account at {self.url}"
        if self.password is None:
            return (
                f"{self.email} was created at {self.url} without a password: an admin of that "
                "Label Studio sets one (its Django admin or `label-studio reset_password`)"
            )
        return (
            f"{self.email} can log in at {self.url}/user/login/ with the password "
            f"{self.password} (shown once; not stored by FairJudge)"
        )


def add_annotator(
    session: Session,
    client: LabelStudioClient,
    email: str,
    name: str = "",
    *,
    service: LabelStudioService | None = None,
) -> NewAnnotator:
    """Create ``email`` in Label Studio (or find it there) and record it; on FairJudge's own
    server (``service``) give it a password to log in with."""
    email = email.strip()
    if "@" not in email or email.startswith("@") or email.endswith("@"):
        raise CampaignError(f"{email!r} is not an e-mail address")
    known = {mail.lower(): uid for uid, mail in client.users().items()}
    created = email.lower() not in known
    password = None
    if not created:
        user_id = known[email.lower()]
    elif service is None:
        user_id = client.create_user(email, name)
    else:  # signed up through the invite link, the password set in the same request
        email = email.lower()  # the sign-up form keeps addresses in lower case
        password = secrets.token_urlsafe(12)
        user_id = service.sign_up(email, password)
        client.name_user(user_id, email, name)
    row = session.exec(select(Annotator).where(Annotator.email == email)).first()
    if row is None:
        session.add(Annotator(email=email, name=name, ls_user_id=user_id))
    else:
        row.ls_user_id = user_id
        row.name = name or row.name
        session.add(row)
    session.commit()
    return NewAnnotator(email, user_id, client.url, password, created)


def list_annotators(session: Session) -> list[dict[str, Any]]:
    """Each recorded annotator (and each rater of a pulled campaign) with, per campaign, the
    items they rated as of the last pull against the campaign's items."""
    people = {a.email: a for a in session.exec(select(Annotator).order_by(col(Annotator.email)))}
    sizes = dict(
        session.exec(
            select(CampaignTask.campaign_id, func.count()).group_by(col(CampaignTask.campaign_id))
        ).all()
    )
    names = dict(session.exec(select(Campaign.id, Campaign.name)).all())
    done: dict[str, dict[int, int]] = defaultdict(dict)
    for rater, campaign_id, items in session.exec(
        select(
            HumanRating.rater,
            HumanRating.campaign_id,
            func.count(func.distinct(HumanRating.item_id)),
        )
        .where(col(HumanRating.campaign_id).is_not(None), col(HumanRating.withdrawn_at).is_(None))
        .group_by(col(HumanRating.rater), col(HumanRating.campaign_id))
    ):
        if campaign_id is not None:
            done[rater][campaign_id] = items
    out = []
    for email in sorted(set(people) | set(done)):
        person = people.get(email)
        out.append(
            {
                "email": email,
                "name": person.name if person else "",
                "user_id": person.ls_user_id if person else None,
                "campaigns": {
                    names[c]: f"{n}/{sizes.get(c, 0)}" for c, n in sorted(done[email].items())
                },
            }
        )
    return out
