"""An operation's one-line result: in the past tense after a run, in the
conditional after a dry run, worded in one place.

Not in the design's layout: ``kubespray-mgmt run`` and the demo end with
the line each operation of :data:`mgmt_driver.operations.lcm.COMMANDS`
returns.  An operation states its result once, as an :class:`Outcome`: a
template whose verb fields (``{add}``) take their form from
:data:`VERBS`, other fields that may be a :class:`Tense` too, and the
nodes the operation adds to and removes from the cluster.
:meth:`Outcome.words` makes the line for a run or for a dry run, so no
operation words a dry run itself and a dry run never says it did what
it only planned ("would add 2 worker(s)", not "added 2 worker(s)").
"""

import collections
import string


class Tense(collections.namedtuple('Tense', 'done planned')):
    """A phrase as a run says it (*done*) and as a dry run does
    (*planned*)."""

    def form(self, planned):
        """:returns: *planned* in a dry run, *done* otherwise."""
        return self.planned if planned else self.done


#: The verb fields of a template and their two forms.
VERBS = {
    'add': Tense('added', 'would add'),
    'answer': Tense('answers', 'would answer'),
    'heal': Tense('healed', 'would heal'),
    'relabel': Tense('relabelled', 'would relabel'),
    'remove': Tense('removed', 'would remove'),
    'renew': Tense('renewed', 'would renew'),
    'skip': Tense('skipped', 'would skip'),
    'terminate': Tense('terminated', 'would terminate'),
    'upgrade': Tense('upgraded', 'would upgrade'),
}


class Summary(str):
    """The worded line (a ``str``: whoever prints or compares it is
    unchanged), with what it is about.

    :ivar planned: True for a dry run's line.
    :ivar added: names of the nodes the operation adds to the cluster
        (as :func:`mgmt_driver.state.follow.describe` records them).
    :ivar removed: names of the nodes it removes.
    """

    planned = False
    added = ()
    removed = ()


class Outcome:
    """What an operation did, or would do, before it is worded.

    :param template: a :meth:`str.format` template; a field named in
        :data:`VERBS` takes that verb's form, any other one the value
        given here (a :class:`Tense` takes its form; a value is never
        parsed as a template).
    :param added: names of the nodes added to the cluster.
    :param removed: names of the nodes removed from it.
    """

    def __init__(self, template, added=(), removed=(), **values):
        self.template = template
        self.added = tuple(added)
        self.removed = tuple(removed)
        self.values = values

    def extended(self, template, **values):
        """:returns: this outcome with *template* (and its *values*)
        appended to its own."""
        return Outcome(self.template + template, self.added, self.removed,
                       **dict(self.values, **values))

    def words(self, planned):
        """:returns: the :class:`Summary` of a dry run (*planned*) or of
        a run."""
        fields = {key: value.form(planned) if isinstance(value, Tense)
                  else value
                  for key, value in dict(VERBS, **self.values).items()}
        summary = Summary(string.Formatter().vformat(
            self.template, (), fields))
        summary.planned = planned
        summary.added, summary.removed = self.added, self.removed
        return summary
