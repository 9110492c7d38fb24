from tools.worker.main import main

main()
