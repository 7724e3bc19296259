"""Sphinx configuration of the mgmt_driver documentation (tox -e docs)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '_ext'))

#: The function that builds ``kubespray-mgmt``'s argument parser, as
#: ``module:function``: the CLI reference is generated from it
#: (``_ext/cli_reference.py``).  The one place that names the module.
CLI_PARSER = 'mgmt_driver.adapters.cli:build_parser'

project = 'mgmt-driver-kubespray'
copyright = 'mgmt_driver developers'  # noqa: A001 (Sphinx's own name)

extensions = [
    'sphinx.ext.autosectionlabel',
    'oslo_config.sphinxext',
    'oslo_config.sphinxconfiggen',
    'cli_reference',
]

# Cross references name their page: :ref:`admin/cli:Exit codes`.
autosectionlabel_prefix_document = True
# The generated CLI reference repeats argparse's own headings
# ("positional arguments") under every subcommand.
suppress_warnings = ['autosectionlabel.admin/cli-reference']

# oslo.config's generator writes the sample file into _static/ at build
# time (doc/source/_static/ is not tracked).
config_generator_config_file = [
    ('../../etc/oslo-config-generator/kubespray-mgmt.conf',
     '_static/kubespray-mgmt'),
]

cli_reference_parser = CLI_PARSER
cli_reference_prog = 'kubespray-mgmt'

exclude_patterns = ['_build']
html_theme = 'alabaster'
