from hpcai.cli.main import main

main()
