from decide.cli import main

main()
