from covey.cli import main

main()
