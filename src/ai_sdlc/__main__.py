from ai_sdlc.cli.app import main

main()
