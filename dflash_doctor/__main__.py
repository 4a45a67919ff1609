from dflash_doctor.cli import main

main()
