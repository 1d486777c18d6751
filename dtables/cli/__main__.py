from dtables.cli import main

main()
