from tokenpace.cli.main import main

main()
