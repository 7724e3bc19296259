"""``.. cli-reference::``: kubespray-mgmt's options, from its own parser.

sphinx-argparse renders the parser; this directive only tells it which
function builds the parser (``cli_reference_parser`` in ``conf.py``,
``module:function``), so that no page names the module.
"""

from sphinxarg import ext


class CliReference(ext.ArgParseDirective):
    """sphinx-argparse's ``argparse`` directive, its parser from conf.py."""

    def run(self):
        """Fill in module, function and program name, then render.

        :raises sphinx.errors.ExtensionError: (through Sphinx) when the
            parser cannot be imported; the build stops, naming it.
        """
        module, _, function = self.config.cli_reference_parser.partition(':')
        self.options.setdefault('module', module)
        self.options.setdefault('func', function)
        self.options.setdefault('prog', self.config.cli_reference_prog)
        return super().run()


def setup(app):
    """Register the directive and its two settings.

    :param app: the Sphinx application.
    """
    app.setup_extension('sphinxarg.ext')
    app.add_config_value('cli_reference_parser', '', 'env')
    app.add_config_value('cli_reference_prog', '', 'env')
    app.add_directive('cli-reference', CliReference)
    return {'parallel_read_safe': True, 'parallel_write_safe': True}
