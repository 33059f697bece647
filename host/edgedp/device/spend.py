"""What the device charged during a command, against what this host received.

A refusal (ERROR frame) is not authenticated: a man in the middle can swap a charged answer for
a forged ``ERR_RATE`` or ``ERR_BUDGET``, and the host would report a row refused that the device
paid for. Only the authenticated lifetime spend (STATE), read before and after, shows what was
charged: every external answer costs the configured epsilon once (docs/protocol.md), so what
rose beyond the answers received was charged for answers this host never got (forged refusals,
lost answers, or another client of the same device meanwhile)."""
from __future__ import annotations

from dataclasses import dataclass

from .protocol import Budget


@dataclass(frozen=True)
class Spend:
    """Micro-epsilon charged (the rise of the authenticated lifetime spend) and received (the
    answers this host received, at the configured epsilon each)."""

    charged: int
    received: int
    per_answer: int  # the epsilon of one answer

    @property
    def not_received(self) -> int:
        """Micro-epsilon charged for answers this host did not receive (0 if none)."""
        return max(self.charged - self.received, 0)


def spend_between(before: Budget, after: Budget, answers: int) -> Spend:
    """The spend between two authenticated states read around ``answers`` received answers, all
    at ``before``'s epsilon per query (the configuration does not change during a stream)."""
    return Spend(after.lifetime_spent - before.lifetime_spent, answers * before.epsilon_micro, before.epsilon_micro)
