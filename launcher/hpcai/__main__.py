from hpcai.cli.main import run

run()
